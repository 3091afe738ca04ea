package dispatcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSeenStore measures the seen-URL store (urls behind the seen
// filter, seenfilter.go) at the size of a large crawl: SEEN_KEYS URLs
// (default 1,000,000) are in a state on disk first. Then
//
//   - check: batches of seenBatch URLs, half of them in the store and half
//     new, are classified the way the crawl does it (the filter rules out
//     most new ones; the rest are looked up in SQLite, a chunk a
//     statement): checks/s;
//   - insert: batches of seenBatch new URLs are inserted (key order,
//     multi-row statements) and committed: new-urls/s made durable.
//
// The command:
//
//	go test -run '^$' -bench SeenStore -benchtime 20x ./dispatcher
func BenchmarkSeenStore(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("SEEN_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SEEN_KEYS=%q: want a positive integer", v)
		}
	}
	const seenBatch = 1 << 16
	ctx := context.Background()
	st, err := openState(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.close()
	d := &Dispatcher{st: st, w: newWindow(), seenKeys: newSeenFilter(0)}
	url := func(i int) string { return fmt.Sprintf("https://host-%06d.example/people/%d", i%200_000, i) }
	tasks := func(from, to int) []*task {
		ts := make([]*task, 0, to-from)
		for i := from; i < to; i++ {
			u := url(i)
			ts = append(ts, &task{key: urlKey(u), url: u, depth: 1, seq: int64(i)})
		}
		return ts
	}
	start := time.Now()
	for from := 0; from < n; from += seenBatch {
		if err := st.begin(ctx); err != nil {
			b.Fatal(err)
		}
		if err := d.insertURLs(ctx, tasks(from, min(from+seenBatch, n))); err != nil {
			b.Fatal(err)
		}
		if err := st.commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d URLs in the store in %s", n, time.Since(start).Round(time.Millisecond))
	next := n

	b.Run("check", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		checked, found := 0, 0
		for b.Loop() {
			keys := make([]int64, 0, seenBatch)
			for i := range seenBatch {
				if i%2 == 0 {
					keys = append(keys, urlKey(url(rng.IntN(n))))
				} else {
					keys = append(keys, urlKey(url(n+1_000_000_000+rng.IntN(1<<30))))
				}
			}
			var maybe []int64
			for _, k := range keys {
				if d.seenKeys.mayHave(k) {
					maybe = append(maybe, k)
				}
			}
			known, err := d.lookupKeys(ctx, maybe)
			if err != nil {
				b.Fatal(err)
			}
			checked += len(keys)
			for _, k := range keys {
				if _, ok := known[k]; ok {
					found++
				}
			}
		}
		if found != checked/2 {
			b.Fatalf("%d of %d found, want half", found, checked)
		}
		b.ReportMetric(float64(checked)/b.Elapsed().Seconds(), "checks/s")
	})
	b.Run("insert", func(b *testing.B) {
		inserted := 0
		for b.Loop() {
			ts := tasks(next, next+seenBatch)
			next += seenBatch
			if err := st.begin(ctx); err != nil {
				b.Fatal(err)
			}
			if err := d.insertURLs(ctx, ts); err != nil {
				b.Fatal(err)
			}
			if err := st.commit(ctx); err != nil {
				b.Fatal(err)
			}
			inserted += len(ts)
		}
		b.ReportMetric(float64(inserted)/b.Elapsed().Seconds(), "new-urls/s")
	})
}
