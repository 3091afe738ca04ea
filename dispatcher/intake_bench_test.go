package dispatcher

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"backfill/etl"
	"backfill/store"
)

// BenchmarkAttachLinks: the dispatcher's link intake, which bounds how fast
// a crawl gets going. 400 records' index pages come back with 100 new
// profile links each; every link is filtered, looked up in the state,
// inserted (seen, frontier, task_records) and added to the window. Each
// iteration starts from a fresh state.
func BenchmarkAttachLinks(b *testing.B) {
	const hosts, links = 400, 100
	set, err := etl.LoadDir(filepath.Join("testdata", "mappings"))
	if err != nil {
		b.Fatal(err)
	}
	pages := make([][]string, hosts)
	for h := range pages {
		for p := range links {
			pages[h] = append(pages[h], fmt.Sprintf("https://people-%04d.example/people/p%03d", h, p))
		}
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		st, err := store.Open(ctx, filepath.Join(dir, "out.db"))
		if err != nil {
			b.Fatal(err)
		}
		d, err := New(Config{StateDir: filepath.Join(dir, "state"), Listen: "tcp://127.0.0.1:*", Mappings: set, Store: st, Depth: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		d.mu.Lock()
		if err := d.st.begin(ctx); err != nil {
			b.Fatal(err)
		}
		for h, ls := range pages {
			var charged int
			if err := d.attachLinks(ctx, ls, int64(h+1), &charged, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := d.commitState(ctx); err != nil {
			b.Fatal(err)
		}
		if d.queuedN != hosts*links {
			b.Fatalf("queued %d tasks, want %d", d.queuedN, hosts*links)
		}
		d.mu.Unlock()
		b.StopTimer()
		d.Close()
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(hosts*links)*float64(b.N)/b.Elapsed().Seconds(), "links/s")
}
