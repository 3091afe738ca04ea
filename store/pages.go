package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Page is a page kept as it was fetched (or as the browser rendered it),
// so that a later run reads it instead of asking its host again: a crawl
// whose mappings changed extracts it anew, a learning learns from it,
// export --warc writes it out.
type Page struct {
	// Key is the URL asked for: a crawl's task URL (normalized), the
	// link a learning followed. A page is kept once under its key.
	Key string
	// URL is where the request ended, after the redirects followed on
	// the key's host; "" when it is Key.
	URL         string
	Status      int    // the final response's HTTP status
	ContentType string // media type, lower case, no parameters
	// Body is the page as the mappings read it: text decoded to UTF-8,
	// or the DOM the browser ended with (Rendered).
	Body      []byte
	Rendered  bool
	FetchedAt time.Time
	// Damaged, set by ListPages only, says why the page's kept body
	// could not be read (Body is then nil): one bad row does not stop
	// a walk over the others.
	Damaged string
}

// Address is where the page ended: URL, else Key.
func (p Page) Address() string {
	if p.URL != "" {
		return p.URL
	}
	return p.Key
}

// Pages keeps fetched pages, compressed, for later runs. The crawl's
// supervisors put the pages they fetch (several at once: every method is
// safe for concurrent use, from several processes); the dispatcher reads
// them back when the mappings change; learning reads and puts teacher
// pages. A bound in bytes is kept by TrimPages, which whoever writes
// calls now and then: the oldest pages go first.
type Pages interface {
	// PutPages keeps pages, each replacing what was kept under its Key.
	// A page whose compressed body is over MaxKeptPage is left out, not
	// an error: PutPages reports how many it kept.
	PutPages(ctx context.Context, pages []Page) (kept int, err error)
	// Page returns the page kept under key; ErrNotFound when none is. A
	// page kept damaged (its body does not unpack to its size) is an
	// error naming it.
	Page(ctx context.Context, key string) (Page, error)
	// ListPages returns at most limit pages, in Key order, whose keys
	// sort after after ("" for the first); a damaged one comes with
	// Damaged set.
	ListPages(ctx context.Context, after string, limit int) ([]Page, error)
	// PageStats counts the pages kept and their compressed bytes.
	PageStats(ctx context.Context) (PageStats, error)
	// TrimPages lets go of the oldest pages (by FetchedAt) until those
	// left take at most maxBytes compressed, and reports how many went.
	TrimPages(ctx context.Context, maxBytes int64) (int, error)
}

// PageStats is what Pages holds.
type PageStats struct {
	Pages int64
	Bytes int64 // compressed
}

// MaxKeptPage bounds one page's compressed body: a MongoDB document
// holds at most 16 MiB, and a page that big is an archive, not a page.
const MaxKeptPage = 8 << 20

// DefaultKeptBytes is the bound of the kept pages a crawl or a learning
// uses unless told otherwise: tens of thousands of pages, compressed.
const DefaultKeptBytes = 1 << 30

// pageListBatch is how many pages EachPage reads at a time.
const pageListBatch = 64

// EachPage calls fn for every page p keeps, in key order, reading
// pageListBatch at a time, so no read stays open while fn works.
func EachPage(ctx context.Context, p Pages, fn func(Page) error) error {
	after := ""
	for {
		batch, err := p.ListPages(ctx, after, pageListBatch)
		if err != nil {
			return err
		}
		for _, pg := range batch {
			if err := fn(pg); err != nil {
				return err
			}
		}
		if len(batch) < pageListBatch {
			return nil
		}
		after = batch[len(batch)-1].Key
	}
}

// gzipWriters are reused: a gzip.Writer's state is most of a megabyte,
// and a new one a page was most of what keeping a page cost.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// packedPage is a page as backends keep it: its body gzipped, with the
// packed and unpacked sizes.
type packedPage struct {
	Page
	host    string
	packed  []byte
	rawSize int64
}

// packPage checks p and compresses its body. ok is false for a page over
// MaxKeptPage.
func packPage(p Page) (packedPage, bool, error) {
	u, err := url.Parse(p.Key)
	if err != nil || u.Host == "" {
		return packedPage{}, false, fmt.Errorf("keep %q: not an absolute URL", p.Key)
	}
	if p.FetchedAt.IsZero() {
		return packedPage{}, false, fmt.Errorf("keep %s: no fetch time", p.Key)
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(p.Body); err != nil {
		return packedPage{}, false, fmt.Errorf("keep %s: %w", p.Key, err)
	}
	if err := zw.Close(); err != nil {
		return packedPage{}, false, fmt.Errorf("keep %s: %w", p.Key, err)
	}
	if buf.Len() > MaxKeptPage {
		return packedPage{}, false, nil
	}
	if p.URL == p.Key {
		p.URL = ""
	}
	p.FetchedAt = p.FetchedAt.UTC().Truncate(time.Millisecond)
	body := p.Body
	p.Body = nil
	return packedPage{Page: p, host: strings.ToLower(u.Host), packed: buf.Bytes(), rawSize: int64(len(body))}, true, nil
}

// errDamaged says a kept body does not unpack to what was kept.
var errDamaged = errors.New("damaged")

// unpackBody unpacks a kept body, which must be size bytes long: no more
// is read, so a damaged row cannot unpack into more than its page was.
func unpackBody(key string, b []byte, size int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("page %s is %w: %v", key, errDamaged, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, size+1))
	if err != nil {
		return nil, fmt.Errorf("page %s is %w: %v", key, errDamaged, err)
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("page %s is %w: %d bytes unpacked, %d kept", key, errDamaged, len(out), size)
	}
	return out, nil
}

// IsDamaged reports whether err is Pages' word that a kept page is
// damaged (the caller may fetch it again).
func IsDamaged(err error) bool { return errors.Is(err, errDamaged) }
