package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// record is one WARC record as read back.
type record struct {
	head  textproto.MIMEHeader
	block []byte
}

// readAll reads every record of a WARC file, checking its framing as
// ISO 28500 lays it out: the version line, named fields, a blank line,
// Content-Length bytes of block, then CRLF CRLF.
func readAll(t *testing.T, r *bufio.Reader) []record {
	t.Helper()
	var out []record
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) && line == "" {
			return out
		}
		if err != nil || line != Version+"\r\n" {
			t.Fatalf("record %d: version line %q, %v", len(out), line, err)
		}
		head, err := textproto.NewReader(r).ReadMIMEHeader()
		if err != nil {
			t.Fatalf("record %d: header: %v", len(out), err)
		}
		n, err := strconv.Atoi(head.Get("Content-Length"))
		if err != nil {
			t.Fatalf("record %d: Content-Length %q", len(out), head.Get("Content-Length"))
		}
		block := make([]byte, n)
		if _, err := io.ReadFull(r, block); err != nil {
			t.Fatalf("record %d: block: %v", len(out), err)
		}
		var end [4]byte
		if _, err := io.ReadFull(r, end[:]); err != nil || string(end[:]) != "\r\n\r\n" {
			t.Fatalf("record %d: ends %q, %v", len(out), end, err)
		}
		out = append(out, record{head, block})
	}
}

func TestWriter(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 800, time.UTC)
	pages := []Page{
		{URL: "http://a.example/p/1", Status: 200, ContentType: "text/html", Body: []byte("<p>Lisbon — ünï</p>"), Date: at},
		{URL: "http://b.example/app", ContentType: "text/html", Body: []byte("<div id=app>drawn</div>"), Date: at, Rendered: true},
		{URL: "http://c.example/gone", Status: 404, ContentType: "text/plain", Body: nil, Date: at},
	}
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Options{Software: "backfill/test", Filename: "pages.warc", Gzip: gz})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pages {
				if err := w.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Write(Page{URL: "http://x.example/a b"}); err == nil {
				t.Error("a URL with a space was written")
			}
			if err := w.Close(); err != nil || w.Records() != len(pages) {
				t.Fatalf("Close: %v, %d records", err, w.Records())
			}
			var r io.Reader = &buf
			if gz {
				// Every record is a member of its own: the first ends
				// where the warcinfo record does.
				zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				zr.Multistream(false)
				first, err := io.ReadAll(zr)
				if err != nil || !strings.HasPrefix(string(first), Version) || !strings.HasSuffix(string(first), "\r\n\r\n") || strings.Count(string(first), Version) != 1 {
					t.Fatalf("first gzip member: %q, %v", first, err)
				}
				if r, err = gzip.NewReader(&buf); err != nil {
					t.Fatal(err)
				}
			}
			recs := readAll(t, bufio.NewReader(r))
			if len(recs) != 1+len(pages) {
				t.Fatalf("%d records, want %d", len(recs), 1+len(pages))
			}
			info := recs[0]
			if info.head.Get("WARC-Type") != "warcinfo" || info.head.Get("WARC-Filename") != "pages.warc" ||
				!strings.Contains(string(info.block), "software: backfill/test\r\n") {
				t.Errorf("warcinfo: %v %q", info.head, info.block)
			}
			ids := map[string]bool{info.head.Get("WARC-Record-ID"): true}
			for i, p := range pages {
				rec := recs[i+1]
				h := rec.head
				id := h.Get("WARC-Record-ID")
				if !strings.HasPrefix(id, "<urn:uuid:") || ids[id] {
					t.Errorf("%s: record id %q", p.URL, id)
				}
				ids[id] = true
				if h.Get("WARC-Target-URI") != p.URL || h.Get("WARC-Date") != "2026-03-04T05:06:07Z" ||
					h.Get("WARC-Warcinfo-ID") != info.head.Get("WARC-Record-ID") || h.Get("WARC-Block-Digest") != digest(rec.block) ||
					h.Get("WARC-Payload-Digest") != digest(p.Body) {
					t.Errorf("%s: header %v", p.URL, h)
				}
				if p.Rendered {
					if h.Get("WARC-Type") != "resource" || h.Get("Content-Type") != "text/html; charset=utf-8" || string(rec.block) != string(p.Body) {
						t.Errorf("%s: resource record %v %q", p.URL, h, rec.block)
					}
					continue
				}
				if h.Get("WARC-Type") != "response" || h.Get("Content-Type") != "application/http;msgtype=response" {
					t.Errorf("%s: response record %v", p.URL, h)
				}
				resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(rec.block)), nil)
				if err != nil {
					t.Fatalf("%s: HTTP block: %v", p.URL, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != p.Status || !strings.HasPrefix(resp.Header.Get("Content-Type"), p.ContentType+"; charset=utf-8") || string(body) != string(p.Body) {
					t.Errorf("%s: HTTP %d %q %q", p.URL, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
			}
		})
	}
}
