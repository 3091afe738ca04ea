//go:build unix

package learn

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkInduce60 learns author, isbn, publisher and publication date
// (the title as match key) from 60 teachers whose product pages are
// about 150 KB each, the pages already in memory: induction alone, as
// issue 23 measured it (195 s of CPU and 516 MB before). It reports the
// CPU seconds and the peak heap of one learning.
//
//	go test -run '^$' -bench Induce60 -benchtime 1x ./learn/
func BenchmarkInduce60(b *testing.B) {
	books := shopBooks(60)
	ps := pageSet{}
	var ts []Teacher
	size := 0
	for i, bk := range books {
		u := fmt.Sprintf("http://shop.example/book/%d", i)
		body := shopPage(bk, i, books, fullShop)
		size += len(body)
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(body)}
		ts = append(ts, Teacher{ID: fmt.Sprint("b", i), Links: []string{u}, Values: map[string]string{
			"title": bk.title, "author": strings.Join(bk.authors, ", "), "isbn": bk.isbn, "publisher": bk.publisher, "date": bk.date}})
	}
	b.Logf("60 pages, %.0f KB each on average", float64(size)/60/1024)
	opts := Options{Fields: []string{"author", "isbn", "publisher", "date"}, MatchKey: "title", PagesPerHost: 100}
	b.ReportAllocs()
	var peak uint64
	var cpu time.Duration
	learned := 0
	for i := 0; i < b.N; i++ {
		runtime.GC()
		stop, done := make(chan struct{}), make(chan uint64)
		go samplePeakHeap(stop, done)
		before := cpuTime(b)
		res, err := Learn(context.Background(), ts, ps, opts)
		cpu += cpuTime(b) - before
		close(stop)
		peak = max(peak, <-done)
		if err != nil {
			b.Fatal(err)
		}
		learned = 0
		for _, f := range res.Groups[0].Fields {
			if f.Status == Learned {
				learned++
			} else {
				b.Logf("%s not learned: %s", f.Field, f.Reason)
			}
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(learned), "fields-learned")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// samplePeakHeap reports on done the largest heap in use seen until
// stop is closed.
func samplePeakHeap(stop <-chan struct{}, done chan<- uint64) {
	var ms runtime.MemStats
	var peak uint64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		select {
		case <-stop:
			runtime.ReadMemStats(&ms)
			done <- max(peak, ms.HeapInuse)
			return
		case <-t.C:
		}
	}
}
