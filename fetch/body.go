package fetch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
)

// Bodies are read in chunks into memory, never past MaxBody decoded bytes
// and never past MaxBody wire bytes: Content-Length is not trusted (it may
// be absent, too small or too large). A compressed body is decoded here, not
// by the transport, so the decoded size is capped and a decompression bomb
// is recognised by its ratio.

const readChunk = 32 << 10

// bodyError is a classified failure while reading a body.
type bodyError struct {
	class Class
	err   error
}

// errWireCap marks that the compressed stream itself passed MaxBody bytes.
var errWireCap = errors.New("compressed body exceeds the size limit")

// wireReader hands the wire bytes to the decoders through its own buffer
// and counts what they consume, exactly: the decoders take bytes one at a
// time through ReadByte rather than buffering ahead, so the count is a
// true measure of the compression ratio. It refuses to hand over more than
// max bytes.
type wireReader struct {
	br  *bufio.Reader
	n   int64
	max int64
}

// wireBufs recycles wireReader buffers: one per request would be half of
// all the bytes a crawl allocates.
var wireBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readChunk) }}

func newWireReader(r io.Reader, max int64) *wireReader {
	br := wireBufs.Get().(*bufio.Reader)
	br.Reset(r)
	return &wireReader{br: br, max: max}
}

// release returns the buffer to the pool; w must not be used afterwards.
func (w *wireReader) release() {
	w.br.Reset(nil)
	wireBufs.Put(w.br)
	w.br = nil
}

func (w *wireReader) Read(p []byte) (int, error) {
	if w.n >= w.max {
		return 0, errWireCap
	}
	if rem := w.max - w.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := w.br.Read(p)
	w.n += int64(n)
	return n, err
}

// ReadByte makes wireReader a flate.Reader, so compress/flate and
// compress/gzip read from it without a buffer of their own.
func (w *wireReader) ReadByte() (byte, error) {
	if w.n >= w.max {
		return 0, errWireCap
	}
	b, err := w.br.ReadByte()
	if err == nil {
		w.n++
	}
	return b, err
}

// readBody returns at most max decoded bytes of hr's body and whether
// more were there.
func (f *Fetcher) readBody(ctx, parent context.Context, hr *http.Response, max int64) ([]byte, bool, *bodyError) {
	wire := newWireReader(hr.Body, max+1)
	defer wire.release()
	codings := contentCodings(hr.Header.Get("Content-Encoding"))
	var r io.Reader = wire
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	// Codings are listed in the order they were applied; undo them from
	// the last.
	for i := len(codings) - 1; i >= 0; i-- {
		dec, err := decoder(codings[i], r)
		if errors.Is(err, io.EOF) {
			return nil, false, nil // an empty compressed body is an empty body
		}
		if err != nil {
			return nil, false, f.bodyFailure(ctx, parent, err, true)
		}
		if c, ok := dec.(io.Closer); ok {
			closers = append(closers, c)
		}
		r = dec
	}

	// A body sent as it is says its length: read it into a slice of that
	// size (most pages are a few KiB; a readChunk buffer each was most of
	// a crawl's allocation).
	hint := int64(readChunk)
	if len(codings) == 0 && hr.ContentLength >= 0 {
		hint = hr.ContentLength + 1
	}
	data, truncated, err := readCapped(r, max, hint)
	if errors.Is(err, errWireCap) {
		truncated, err = true, nil
	}
	if err != nil {
		return nil, false, f.bodyFailure(ctx, parent, err, len(codings) > 0)
	}
	if truncated && len(codings) > 0 && wire.n*int64(f.cfg.MaxRatio) < int64(len(data)) {
		return nil, false, &bodyError{ClassTooLarge, fmt.Errorf(
			"decompression bomb: %d compressed bytes expand past %d bytes (ratio above %d)", wire.n, max, f.cfg.MaxRatio)}
	}
	return data, truncated, nil
}

// bodyFailure classifies an error met while reading a body.
func (f *Fetcher) bodyFailure(ctx, parent context.Context, err error, coded bool) *bodyError {
	if c, ok := contextClass(ctx, parent); ok {
		return &bodyError{c, fmt.Errorf("reading body: %w", contextErr(ctx, parent))}
	}
	if isTimeout(err) {
		return &bodyError{ClassTimeout, fmt.Errorf("reading body: %w", err)}
	}
	var ce *codingError
	if errors.As(err, &ce) || (coded && isCorruptStream(err)) {
		return &bodyError{ClassEncoding, fmt.Errorf("decoding body: %w", err)}
	}
	// Connection closed early (Content-Length longer than the body, or a
	// reset), or a chunked encoding gone wrong.
	return &bodyError{ClassProtocol, fmt.Errorf("reading body: %w", err)}
}

func isCorruptStream(err error) bool {
	var fe flate.CorruptInputError
	return errors.As(err, &fe) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		strings.Contains(err.Error(), "brotli")
}

// codingError is an unsupported or malformed Content-Encoding.
type codingError struct{ msg string }

func (e *codingError) Error() string { return e.msg }

// contentCodings splits a Content-Encoding header, dropping identity.
func contentCodings(h string) []string {
	var out []string
	for _, c := range strings.Split(h, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "" || c == "identity" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// decoder wraps r to undo one content coding.
func decoder(coding string, r io.Reader) (io.Reader, error) {
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, &codingError{fmt.Sprintf("gzip header: %v", err)}
		}
		return zr, nil
	case "deflate":
		// "deflate" is meant to be zlib-wrapped, but many servers send a
		// raw deflate stream; the zlib header tells them apart.
		var br interface {
			io.Reader
			Peek(int) ([]byte, error)
		}
		if w, ok := r.(*wireReader); ok {
			br = w.br // peeking consumes nothing, so the count stays exact
			r = w
		} else {
			b := bufio.NewReader(r)
			br, r = b, b
		}
		hdr, err := br.Peek(2)
		if len(hdr) == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if len(hdr) == 2 && hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
			zr, err := zlib.NewReader(r)
			if err != nil {
				return nil, &codingError{fmt.Sprintf("zlib header: %v", err)}
			}
			return zr, nil
		}
		return flate.NewReader(r), nil
	case "br":
		return brotli.NewReader(r), nil
	}
	return nil, &codingError{fmt.Sprintf("unsupported content encoding %q", coding)}
}

// readCapped reads r until EOF or until max bytes are held; it reads at
// most one byte past max, to learn whether there was more. It reads
// straight into the slice it returns, which starts at hint bytes (at
// least one) and grows as the body does.
func readCapped(r io.Reader, max, hint int64) ([]byte, bool, error) {
	if hint < 1 {
		hint = 1
	}
	buf := make([]byte, 0, min(max+1, hint))
	for {
		if len(buf) == cap(buf) {
			grow := min(int64(cap(buf)), max+1-int64(len(buf))) // double, up to max+1
			buf = slices.Grow(buf, int(grow))
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), max+1)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return buf[:max], true, nil
		}
		if errors.Is(err, io.EOF) {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}
