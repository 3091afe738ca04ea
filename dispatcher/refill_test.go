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
		if _, err := st.conn.ExecContext(ctx, `INSERT INTO urls(key, url, depth, matched, priority, render, seq, state, first_seen, score)
			VALUES (?, ?, ?, 0, ?, 0, ?, 0, 0, ?)`, tk.key, tk.url, tk.depth, tk.priority, tk.seq, tk.level); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(seq int64, depth, level int) *task {
		return &task{key: seq, url: fmt.Sprintf("http://a.test/%d", seq), host: "a.test", domain: "a.test",
			depth: depth, level: level, seq: seq}
	}

	// More than one chunk, in a mixed order: read back whole, cursor at
	// the last task in frontier order.
	n := refillChunk + 100
	for i := range n {
		put(mk(int64(i+1), 1+i%2, b2i(i%3 == 0)))
	}
	d.w.spilled = true
	if err := d.refill(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(d.w.queued); got != n || d.w.spilled {
		t.Fatalf("after first refill: %d queued, spilled %v; want %d, false", got, d.w.spilled, n)
	}
	if c := d.w.cursor; c == nil || c.level != 0 || c.depth != 2 || c.seq != int64(n) {
		t.Fatalf("cursor %+v, want the last task in order (level 0, depth 2, seq %d)", c, n)
	}

	// Those are done; the window fills up with windowCap others (depth
	// 1). A new task sorting after all of them spills to SQLite; one
	// sorting before them takes the place of the window's last task,
	// which goes back to SQLite, and the cursor moves to just before that.
	if _, err := st.conn.ExecContext(ctx, `UPDATE urls SET state = 2`); err != nil {
		t.Fatal(err)
	}
	d.w = newWindow()
	if _, err := st.conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	for i := range windowCap {
		tk := mk(int64(n+10+i), 1, 0)
		put(tk)
		if !d.w.add(tk, false) {
			t.Fatalf("task %d of %d not added", i, windowCap)
		}
	}
	if _, err := st.conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// As if a refill had read them: the cursor is at the last.
	last := mk(int64(n+10+windowCap-1), 1, 0)
	k := last.place()
	d.w.cursor = &k
	early, late := mk(int64(n+1), 0, 0), mk(int64(n+2), 3, 0)
	put(late)
	if d.w.add(late, false) {
		t.Fatalf("task %d, last in frontier order, added to a full window", late.key)
	}
	put(early)
	if !d.w.add(early, false) {
		t.Fatalf("task %d, first in frontier order, not added to a full window", early.key)
	}
	if d.w.queued[last.key] != nil || len(d.w.queued) != windowCap || !d.w.spilled {
		t.Fatalf("the window's last task %d stayed (%d queued, spilled %v)", last.key, len(d.w.queued), d.w.spilled)
	}
	if c := d.w.cursor; c == nil || !c.before(last) || c.before(mk(last.seq-1, 1, 0)) {
		t.Fatalf("cursor %+v, want just before the task given up (%+v)", c, last.place())
	}

	// Everything in the window is dispatched and done: refill reads back
	// the task given up and the one that spilled.
	if _, err := st.conn.ExecContext(ctx, `UPDATE urls SET state = 2 WHERE key NOT IN (?, ?)`, last.key, late.key); err != nil {
		t.Fatal(err)
	}
	c := d.w.cursor
	d.w = newWindow()
	d.w.cursor, d.w.spilled = c, true
	if err := d.refill(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*task{last, late} {
		if d.w.queued[tk.key] == nil {
			t.Errorf("task %d (depth %d) not read back", tk.key, tk.depth)
		}
	}
	if len(d.w.queued) != 2 || d.w.spilled {
		t.Errorf("after the last refill: %d queued, spilled %v; want 2, false", len(d.w.queued), d.w.spilled)
	}
}
