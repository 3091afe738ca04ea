package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestBatchWrites: the URLs, links and refusals a batch holds and writes
// back with multi-row statements leave the state as writing each row with
// a statement of its own did — duplicates within the batch, conflicts with
// rows the state holds already, and batches of more rows than SQLite takes
// parameters in one statement.
func TestBatchWrites(t *testing.T) {
	type link struct {
		url   string
		rec   int64
		depth int
	}
	type refused struct {
		rec   int64
		page  string
		value string
	}
	type writes struct {
		urls     []string // new URLs, queued at depth 1
		links    []link
		refusals []refused
	}
	many := func(n int, f func(i int) writes) writes {
		var w writes
		for i := range n {
			x := f(i)
			w.urls = append(w.urls, x.urls...)
			w.links = append(w.links, x.links...)
			w.refusals = append(w.refusals, x.refusals...)
		}
		return w
	}
	u := func(i int) string { return fmt.Sprintf("https://h%d.example/p/%d", i%13, i) }
	cases := []struct {
		name   string
		before writes // in the state already, a statement a row
		batch  writes
	}{
		{name: "empty"},
		{
			name:  "new URLs and their links",
			batch: writes{urls: []string{u(1), u(2), u(3)}, links: []link{{u(1), 1, 1}, {u(2), 1, 1}, {u(3), 2, 1}, {u(1), 2, 2}}},
		},
		{
			name: "a link held twice keeps the least depth",
			batch: writes{urls: []string{u(1)}, links: []link{
				{u(1), 1, 2}, {u(1), 1, 1}, {u(1), 1, 2}, {u(1), 2, 1}, {u(1), 2, 1}}},
		},
		{
			name:   "a link the state holds keeps the least depth",
			before: writes{urls: []string{u(1), u(2)}, links: []link{{u(1), 1, 1}, {u(2), 1, 2}}},
			batch:  writes{links: []link{{u(1), 1, 2}, {u(2), 1, 1}, {u(1), 3, 0}}},
		},
		{
			name:   "the first refusal of a page stands",
			before: writes{refusals: []refused{{1, u(1), "Al"}}},
			batch:  writes{refusals: []refused{{1, u(1), "Bo"}, {2, u(1), "Cy"}, {2, u(1), "Di"}, {2, u(2), "Ed"}}},
		},
		{
			// 3 parameters a link, 5 a refusal, 8 a URL: each kind is more
			// than 32,766 parameters.
			name:   "more rows than one statement takes",
			before: many(50, func(i int) writes { return writes{urls: []string{u(i)}, links: []link{{u(i), 7, 2}}} }),
			batch: many(12_000, func(i int) writes {
				w := writes{links: []link{{u(i % 5_000), int64(i % 7), 1 + i%2}}}
				if i >= 50 && i < 5_000 {
					w.urls = []string{u(i)}
				}
				if i < 7_000 {
					w.refusals = []refused{{int64(i % 3), u(i % 2_500), fmt.Sprint(i)}}
				}
				return w
			}),
		},
	}
	ctx := context.Background()
	open := func(t *testing.T) *Dispatcher {
		t.Helper()
		dir := t.TempDir()
		st, err := openState(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.close() })
		d := &Dispatcher{st: st, w: newWindow(), cfg: Config{StateDir: dir}, log: slog.New(slog.DiscardHandler)}
		if err := d.setupSeenFilter(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.begin(ctx); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// oneByOne writes w a statement a row, as the dispatcher did.
	oneByOne := func(t *testing.T, d *Dispatcher, w writes) {
		t.Helper()
		for i, url := range w.urls {
			if _, err := d.st.conn.ExecContext(ctx, `INSERT INTO urls(key, url, depth, matched, priority, render, seq, state, first_seen)
				VALUES (?, ?, 1, 0, 0, 0, ?, 0, 1)`, urlKey(url), url, i+1); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range w.links {
			if _, err := exec(ctx, d.st.q.linkPut, urlKey(l.url), l.rec, l.depth); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range w.refusals {
			if _, err := d.st.conn.ExecContext(ctx, `INSERT INTO refusals(rec, page, field, page_value, record_value)
				VALUES (?, ?, 'name', ?, 'X') ON CONFLICT DO NOTHING`, r.rec, r.page, r.value); err != nil {
				t.Fatal(err)
			}
		}
	}
	// batched holds w and writes it back.
	batched := func(t *testing.T, d *Dispatcher, w writes) {
		t.Helper()
		for i, url := range w.urls {
			d.pend.addURL(&task{key: urlKey(url), url: url, depth: 1, seq: int64(i + 1)})
		}
		for _, l := range w.links {
			d.pend.addLink(urlKey(l.url), l.rec, l.depth)
		}
		for _, r := range w.refusals {
			d.pend.addRefusal(r.rec, r.page, refusal{field: "name", pageValue: r.value, recordValue: "X"})
		}
		// recordsNeed reads the held links of a URL by recsOf: each
		// (URL, record) once.
		n := 0
		for url, recs := range d.pend.recsOf {
			for _, rec := range recs {
				if _, ok := d.pend.linkDepth(url, rec); !ok {
					t.Errorf("recsOf has %d → %d, links do not", url, rec)
				}
			}
			n += len(recs)
		}
		if n != len(d.pend.links) {
			t.Errorf("recsOf holds %d links, links %d", n, len(d.pend.links))
		}
		if err := d.writeBack(ctx); err != nil {
			t.Fatal(err)
		}
		if !d.pend.empty() {
			t.Error("rows still held after writeBack")
		}
	}
	dump := func(t *testing.T, d *Dispatcher) string {
		t.Helper()
		var b strings.Builder
		for _, q := range []string{
			`SELECT key, url, depth, state, matched, priority, render, seq FROM urls ORDER BY key`,
			`SELECT url, rec, depth FROM links ORDER BY url, rec`,
			`SELECT rec, page, field, page_value, record_value FROM refusals ORDER BY rec, page`,
		} {
			rows, err := d.st.conn.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintln(&b, vals...)
			}
			rows.Close()
			b.WriteString("--\n")
		}
		return b.String()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, got := open(t), open(t)
			oneByOne(t, want, c.before)
			oneByOne(t, got, c.before)
			oneByOne(t, want, c.batch)
			batched(t, got, c.batch)
			w, g := dump(t, want), dump(t, got)
			if w != g {
				t.Errorf("batched writes differ from one statement a row:\n got %.600s\nwant %.600s", g, w)
			}
			if n := strings.Count(g, "\n"); n < len(c.before.urls)+3 {
				t.Errorf("%d rows, want at least the %d URLs", n, len(c.before.urls))
			}
			for _, url := range c.batch.urls {
				if !got.seenKeys.mayHave(urlKey(url)) {
					t.Fatalf("%s written but not in the seen filter", url)
				}
			}
		})
	}
}
