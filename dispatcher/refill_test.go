package dispatcher

import (
	"context"
	"fmt"
	"testing"
)

// TestRefillCursor checks that refill reads the frontier on from the
// window's cursor in frontier order, and that a task spilling to SQLite
// before the cursor (it sorts earlier than what was read) is not skipped.
func TestRefillCursor(t *testing.T) {
	ctx := context.Background()
	st, err := openState(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	d := &Dispatcher{st: st, w: newWindow()}
	put := func(tk *task) {
		t.Helper()
		if _, err := st.conn.ExecContext(ctx, `INSERT INTO frontier(id, url, host, domain, depth, matched, priority, render, seq, state)
			VALUES (?, ?, 'a.test', 'a.test', ?, ?, ?, 0, ?, 0)`, tk.id, tk.url, tk.depth, b2i(tk.matched), tk.priority, tk.seq); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(seq int64, depth int, matched bool) *task {
		return &task{id: fmt.Sprintf("t%04d", seq), url: fmt.Sprintf("http://a.test/%d", seq), host: "a.test", domain: "a.test",
			depth: depth, matched: matched, seq: seq}
	}

	// More than one chunk, in a mixed order: read back whole, cursor at
	// the last task in frontier order.
	n := refillChunk + 100
	for i := range n {
		put(mk(int64(i+1), 1+i%2, i%3 == 0))
	}
	d.w.spilled = true
	if err := d.refill(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(d.w.queued); got != n || d.w.spilled {
		t.Fatalf("after first refill: %d queued, spilled %v; want %d, false", got, d.w.spilled, n)
	}
	if c := d.w.cursor; c == nil || c.matched || c.depth != 2 || c.seq != int64(n) {
		t.Fatalf("cursor %+v, want the last task in order (unmatched, depth 2, seq %d)", c, n)
	}

	// Those are done; the window fills up with others (stand-ins: only
	// its count matters to add). Two new tasks spill: one sorting before
	// the cursor, one after.
	if _, err := st.conn.ExecContext(ctx, `UPDATE frontier SET state = 2`); err != nil {
		t.Fatal(err)
	}
	clear(d.w.queued)
	for i := range windowCap {
		d.w.queued[fmt.Sprint("x", i)] = &task{}
	}
	early, late := mk(int64(n+1), 0, false), mk(int64(n+2), 3, false)
	for _, tk := range []*task{early, late} {
		put(tk)
		if d.w.add(tk, false) {
			t.Fatalf("task %s added to a full window", tk.id)
		}
	}
	if c := d.w.cursor; c == nil || !c.before(early) {
		t.Fatalf("cursor %+v not moved before the spilled task", c)
	}
	clear(d.w.queued)
	if err := d.refill(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*task{early, late} {
		if d.w.queued[tk.id] == nil {
			t.Errorf("spilled task %s (depth %d) not read back", tk.id, tk.depth)
		}
	}
	if len(d.w.queued) != 2 || d.w.spilled {
		t.Errorf("after second refill: %d queued, spilled %v; want 2, false", len(d.w.queued), d.w.spilled)
	}
}
