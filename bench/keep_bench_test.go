package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"backfill/testweb"
)

// BenchmarkKeptPages crawls the large fixture web with backfill keeping
// the pages it fetches (--keep-pages, the default 1GiB: every page gzipped
// into the results store behind the workers) and with --keep-pages 0, one
// after the other in the same run, and prints the cost of keeping them:
// pages/s and peak RSS as ratios, and the store's size.
func BenchmarkKeptPages(b *testing.B) {
	hosts := envInt(b, "BENCH_HOSTS", testweb.DefaultLargeHosts)
	pages := envInt(b, "BENCH_PAGES", testweb.DefaultLargePages)
	workers := envInt(b, "BENCH_WORKERS", 16)
	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: pages})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	cb := newCrawlBench(b, web, pages, workers)
	fmt.Printf("kept pages: testweb of %d hosts × (%d profiles + index) = %d pages, %d workers, GOMAXPROCS %d\n",
		hosts, pages, cb.expected, workers, runtime.GOMAXPROCS(0))
	bin := goBuild(b, "..", "./cmd/backfill", filepath.Join(cb.dir, "backfill"))
	maps := fixtureMappings(b, cb.dir)
	results := map[string]outcome{}
	stores := map[string]int64{}
	for _, c := range []struct{ name, keep string }{{"none", "0"}, {"kept", "1GiB"}} {
		b.Run(c.name, func(b *testing.B) {
			var last string
			results[c.name] = cb.measure(b, func(i int) *exec.Cmd {
				last = filepath.Join(cb.dir, fmt.Sprintf("state-%s-%d", c.name, i))
				args := []string{"run", "--records", cb.records, "--mappings", maps, "--host-in-flight", "4",
					"--state-dir", last, "--delay", "0", "--workers", strconv.Itoa(workers), "--allow-loopback",
					"--log-level", "warn", "--keep-pages", c.keep}
				return exec.Command(bin, append(args, cb.resolveA...)...)
			})
			stores[c.name] = storeSize(filepath.Join(last, "results.db"))
		})
	}
	none, kept := results["none"], results["kept"]
	for _, n := range []string{"none", "kept"} {
		o := results[n]
		fmt.Printf("kept pages: %-4s %6d pages in %8s: %8.1f pages/s, peak RSS %6.1f MiB, results store %6.1f MiB\n",
			n, o.pages, o.wall.Round(1e6), o.pagesPerSec(), o.rssMiB, float64(stores[n])/(1<<20))
	}
	if none.pages > 0 && kept.pages > 0 {
		fmt.Printf("kept pages: kept/none: pages/s ×%.2f, peak RSS ×%.2f\n", kept.pagesPerSec()/none.pagesPerSec(), kept.rssMiB/none.rssMiB)
	}
}

// storeSize is the size of a SQLite file with its WAL.
func storeSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
