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
		ts = append(ts, Teacher{ID: fmt.Sprint("b", i), Links: []string{u}, Values: bookValues(bk)})
	}
	b.Logf("60 pages, %.0f KB each on average", float64(size)/60/1024)
	benchLearn(b, ts, ps, Options{Fields: []string{"author", "isbn", "publisher", "date"}, MatchKey: "title", PagesPerHost: 100})
}

// BenchmarkLearnDepth2 is issue 32's budget: 60 teachers whose product
// pages of about 150 KB are one or two links from their own link, found
// at --depth 2 through hub pages. Each teacher's link is a hub page of
// its own; half of them link to the teacher's product page, half to a
// category page of the shop listing twenty books (the teacher's and
// others'), so the search reads the product pages of 120 books, each
// with 750 links, and learns from 60. The pages are in memory: the
// search and the induction alone.
//
//	go test -run '^$' -bench LearnDepth2 -benchtime 1x ./learn/
func BenchmarkLearnDepth2(b *testing.B) {
	const teachers, listed = 60, 20
	books := shopBooks(2 * teachers)
	ps := pageSet{}
	add := func(u, body string) { ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(body)} }
	for i, bk := range books {
		add(fmt.Sprintf("http://shop.example/book/%d", i), shopPage(bk, i, books, fullShop))
	}
	for k := 0; k < teachers/(listed/2); k++ {
		var links strings.Builder
		for j := 0; j < listed/2; j++ {
			// The category's teachers, and as many other books.
			fmt.Fprintf(&links, `<li><a href="/book/%d">%s</a></li><li><a href="/book/%d">%s</a></li>`,
				k*listed/2+j, books[k*listed/2+j].title, teachers+k*listed/2+j, books[teachers+k*listed/2+j].title)
		}
		add(fmt.Sprintf("http://shop.example/category/%d", k), pageHTML("<h1>Books</h1><ul>"+links.String()+"</ul>"))
	}
	var ts []Teacher
	for i := 0; i < teachers; i++ {
		target := fmt.Sprintf("http://shop.example/book/%d", i)
		if i%2 == 1 {
			target = fmt.Sprintf("http://shop.example/category/%d", i/(listed/2))
		}
		hub := fmt.Sprintf("http://hub.example/reader/%d", i)
		add(hub, pageHTML(fmt.Sprintf(`<p>A reader's page.</p><a href="%s">a book I like</a><a href="http://hub.example/">home</a>`, target)))
		ts = append(ts, Teacher{ID: fmt.Sprint("b", i), Links: []string{hub}, Values: bookValues(books[i])})
	}
	benchLearn(b, ts, ps, Options{Fields: []string{"author", "isbn", "publisher", "date"}, MatchKey: "title", Depth: 2, PagesPerHost: 200})
}

func bookValues(bk shopBook) map[string]string {
	return map[string]string{"title": bk.title, "author": strings.Join(bk.authors, ", "), "isbn": bk.isbn, "publisher": bk.publisher, "date": bk.date}
}

// benchLearn learns b.N times and reports the CPU seconds and the peak
// heap of one learning, the fields it learned, and the process's peak
// resident memory (Linux reports it in KiB).
func benchLearn(b *testing.B, ts []Teacher, ps pageSet, opts Options) {
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
		for _, g := range res.Groups {
			for _, f := range g.Fields {
				if f.Status == Learned {
					learned++
				} else {
					b.Logf("%s: %s not learned: %s", g.Name, f.Field, f.Reason)
				}
			}
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(learned), "fields-learned")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		// The process's own, the generated pages included: one
		// benchmark a process says what learning holds at most.
		b.ReportMetric(float64(ru.Maxrss)/1024, "max-rss-MiB")
	}
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
