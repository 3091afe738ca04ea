package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Version is the WARC version the records say.
const Version = "WARC/1.1"

// Page is a page to write.
type Page struct {
	URL         string // WARC-Target-URI
	Status      int    // HTTP status; 0 is written as 200
	ContentType string // media type without parameters
	Body        []byte
	Date        time.Time // when it was fetched
	Rendered    bool      // a browser's DOM: a resource record
}

// Options configure a Writer.
type Options struct {
	Software string // the warcinfo record's "software"
	Filename string // the warcinfo record's WARC-Filename; "" for none
	Gzip     bool   // each record a gzip member
}

// Writer writes WARC records to an io.Writer.
type Writer struct {
	w    *bufio.Writer
	gzip bool
	zw   *gzip.Writer // reused record to record
	info string       // the warcinfo record's id
	n    int
}

// NewWriter writes the warcinfo record to w and returns the Writer of
// the records after it.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	ww := &Writer{w: bufio.NewWriter(w), gzip: opts.Gzip, info: recordID()}
	var fields bytes.Buffer
	if opts.Software != "" {
		fmt.Fprintf(&fields, "software: %s\r\n", oneLine(opts.Software))
	}
	fields.WriteString("format: WARC File Format 1.1\r\n")
	fields.WriteString("conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	head := []string{"WARC-Type: warcinfo", "WARC-Record-ID: " + ww.info, "WARC-Date: " + warcDate(time.Now())}
	if opts.Filename != "" {
		head = append(head, "WARC-Filename: "+oneLine(opts.Filename))
	}
	head = append(head, "Content-Type: application/warc-fields")
	if err := ww.record(head, fields.Bytes()); err != nil {
		return nil, err
	}
	return ww, nil
}

// Write writes p as one record.
func (w *Writer) Write(p Page) error {
	if p.URL == "" || strings.ContainsAny(p.URL, " \r\n") {
		return fmt.Errorf("warc: page %q: not a URL a record can name", p.URL)
	}
	ctype := p.ContentType
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	if strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "html") || strings.Contains(ctype, "json") || strings.Contains(ctype, "xml") {
		ctype += "; charset=utf-8"
	}
	payload := digest(p.Body)
	head := []string{"WARC-Record-ID: " + recordID(), "WARC-Date: " + warcDate(p.Date), "WARC-Target-URI: " + p.URL,
		"WARC-Warcinfo-ID: " + w.info}
	var block []byte
	if p.Rendered {
		head = append([]string{"WARC-Type: resource"}, head...)
		head = append(head, "Content-Type: "+oneLine(ctype))
		block = p.Body
	} else {
		status := p.Status
		if status == 0 {
			status = http.StatusOK
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", status, http.StatusText(status), oneLine(ctype), len(p.Body))
		b.Write(p.Body)
		block = b.Bytes()
		head = append([]string{"WARC-Type: response"}, head...)
		head = append(head, "Content-Type: application/http;msgtype=response")
	}
	head = append(head, "WARC-Payload-Digest: "+payload, "WARC-Block-Digest: "+digest(block))
	if err := w.record(head, block); err != nil {
		return err
	}
	w.n++
	return nil
}

// Records counts the page records written.
func (w *Writer) Records() int { return w.n }

// Close flushes what is buffered; the io.Writer stays open.
func (w *Writer) Close() error { return w.w.Flush() }

// record writes one record: the version line, head, Content-Length,
// a blank line, block and two CRLFs.
func (w *Writer) record(head []string, block []byte) error {
	var out io.Writer = w.w
	var zw *gzip.Writer
	if w.gzip {
		if w.zw == nil {
			w.zw = gzip.NewWriter(w.w)
		} else {
			w.zw.Reset(w.w)
		}
		zw = w.zw
		out = zw
	}
	var b bytes.Buffer
	b.WriteString(Version + "\r\n")
	for _, h := range head {
		b.WriteString(h + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(block))
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	if _, err := out.Write(block); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	if _, err := io.WriteString(out, "\r\n\r\n"); err != nil {
		return fmt.Errorf("warc: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("warc: %w", err)
		}
	}
	return nil
}

// recordID is a new WARC-Record-ID: a random (version 4) UUID URN.
func recordID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("<urn:uuid:%x-%x-%x-%x-%x>", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// warcDate is t as WARC-Date writes it (UTC, to the second).
func warcDate(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

// digest is the "sha1:BASE32" digest of b, as WARC tools write it.
func digest(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// oneLine keeps a header value on its line.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
