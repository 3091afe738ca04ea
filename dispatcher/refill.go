package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
)

// refill tops the window up from SQLite when it has room for a chunk
// and SQLite holds queued tasks the window does not. It reads on from the
// window's cursor (see window.cursor), a chunk at a time and at most
// refillChunks chunks per call, so a refill costs about what it adds: it
// used to read the whole window again each time, and the Run loop
// dispatched nothing for the 200ms that took.
//
// Records not yet seeded (seeds.go) go first: their links are the crawl's
// depth 0, before any link found on a page in frontier order, and
// seeding them as the window drains keeps the frontier's tables small.
func (d *Dispatcher) refill(ctx context.Context) error {
	for d.unseeded() && len(d.w.queued) <= windowCap-refillChunk {
		if _, err := d.seedMore(ctx); err != nil {
			return err
		}
	}
	if !d.w.spilled || len(d.w.queued) > windowCap-refillChunk {
		return nil
	}
	for range refillChunks {
		n, full, err := d.refillChunk(ctx)
		if err != nil {
			return err
		}
		if full {
			d.w.spilled = true
			return nil
		}
		if n < refillChunk {
			d.w.spilled = false // read to the end
			return nil
		}
		if len(d.w.queued) > windowCap-refillChunk {
			return nil
		}
	}
	return nil
}

// refillChunk reads up to refillChunk queued tasks after the cursor into
// the window. n is the rows read; full reports that the window filled up
// before they were all taken.
func (d *Dispatcher) refillChunk(ctx context.Context) (n int, full bool, err error) {
	var rows *sql.Rows
	if c := d.w.cursor; c != nil {
		rows, err = query(ctx, d.st.q.refillAfter, c.priority, c.level, c.depth, c.seq, refillChunk)
	} else {
		rows, err = query(ctx, d.st.q.refill, refillChunk)
	}
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		n++
		t := &task{}
		var u sql.NullString
		var matched, render int
		if err := rows.Scan(&t.key, &u, &t.depth, &matched, &t.priority, &render, &t.seq, &t.hops, &t.level); err != nil {
			return n, false, fmt.Errorf("dispatcher: state refill: %w", err)
		}
		t.matched, t.render = matched == 1, render == 1
		t.base = levelValue(t.level)
		t.value, t.keep = t.base, true
		k := t.place()
		d.w.cursor = &k
		if d.w.queued[t.key] != nil || d.w.leased[t.key] != nil {
			continue
		}
		// The host and domain are derived again rather than stored with
		// every queued URL: a parse costs less than the bytes would.
		t.url = u.String
		if t.host, t.domain = hostDomain(t.url); t.host == "" {
			d.log.Warn("queued task without a URL dropped", "key", taskID(t.key))
			if _, err := exec(ctx, d.st.q.urlDrop, t.key); err != nil {
				return n, false, err
			}
			d.queuedN--
			continue
		}
		if len(d.w.queued) >= windowCap {
			// Read it again next time: the cursor goes back before it.
			k.seq--
			d.w.cursor = &k
			return n, true, nil
		}
		d.w.add(t, true)
	}
	if err := rows.Err(); err != nil {
		return n, false, fmt.Errorf("dispatcher: state refill: %w", err)
	}
	return n, false, nil
}
