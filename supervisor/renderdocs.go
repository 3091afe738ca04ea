package supervisor

import (
	"sync"
	"time"

	"backfill/fetch"
)

// renderDocs keeps, on a render node, the HTML of pages that looked like
// JavaScript shells (etl.JSOnly) when they were fetched: the dispatcher
// may send such a page back to be rendered, and its render then starts
// from the HTML already here instead of asking the host for the page a
// second time. A render task whose page is not here (it went to another
// supervisor, or is older than the TTL) fetches it once. Bounded in
// entries and bytes, oldest dropped first. Safe for concurrent use.
type renderDocs struct {
	maxN     int
	maxBytes int64
	ttl      time.Duration

	mu    sync.Mutex
	docs  map[string]renderDoc
	order []string // keys, oldest first (may hold keys already taken)
	bytes int64
}

type renderDoc struct {
	resp *fetch.Response
	at   time.Time
}

// Bounds of renderDocs: a render task follows its page's result within a
// dispatcher round trip, so a few minutes and a few dozen pages cover the
// pages of the tasks in flight.
const (
	renderDocsMax   = 256
	renderDocsBytes = 32 << 20
	renderDocsTTL   = 10 * time.Minute
)

func newRenderDocs(maxN int, maxBytes int64, ttl time.Duration) *renderDocs {
	return &renderDocs{maxN: maxN, maxBytes: maxBytes, ttl: ttl, docs: make(map[string]renderDoc)}
}

// put keeps resp as the page of the task URL rawURL.
func (d *renderDocs) put(rawURL string, resp *fetch.Response) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.docs[rawURL]; ok {
		d.bytes -= int64(len(old.resp.Body))
	} else {
		d.order = append(d.order, rawURL)
	}
	d.docs[rawURL] = renderDoc{resp: resp, at: time.Now()}
	d.bytes += int64(len(resp.Body))
	for (len(d.docs) > d.maxN || d.bytes > d.maxBytes) && len(d.order) > 0 {
		d.drop(d.order[0])
		d.order = d.order[1:]
	}
	if len(d.order) > 2*d.maxN {
		// Keys taken since leave holes; rebuild the order from the map.
		kept := d.order[:0]
		for _, k := range d.order {
			if _, ok := d.docs[k]; ok {
				kept = append(kept, k)
			}
		}
		d.order = kept
	}
}

// take removes and returns the page kept for rawURL, nil when none is
// kept or it is older than the TTL.
func (d *renderDocs) take(rawURL string) *fetch.Response {
	d.mu.Lock()
	defer d.mu.Unlock()
	doc, ok := d.docs[rawURL]
	if !ok {
		return nil
	}
	d.drop(rawURL)
	if time.Since(doc.at) > d.ttl {
		return nil
	}
	return doc.resp
}

// drop forgets rawURL's page. Callers hold mu.
func (d *renderDocs) drop(rawURL string) {
	if doc, ok := d.docs[rawURL]; ok {
		d.bytes -= int64(len(doc.resp.Body))
		delete(d.docs, rawURL)
	}
}
