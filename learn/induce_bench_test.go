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

// shopBook is one product page of the benchmark's shop.
type shopBook struct {
	title, isbn, publisher, date string
	authors                      []string
}

func shopBooks(n int) []shopBook {
	first := []string{"Ada", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas"}
	last := []string{"Almeida", "Berger", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat"}
	pubs := []string{"Harbour Press", "Northwind Books", "Lantern House", "Meridian", "Quillfeather"}
	var out []shopBook
	for i := 0; i < n; i++ {
		out = append(out, shopBook{
			title:     fmt.Sprintf("The %s of %s, volume %d", []string{"Atlas", "Garden", "Voyage", "Archive"}[i%4], last[i%len(last)], i+1),
			authors:   []string{first[i%len(first)] + " " + last[(i/3)%len(last)]},
			isbn:      fmt.Sprintf("978-%d-%05d-%03d-%d", i%10, 10000+i*37, i%1000, i%10),
			publisher: pubs[i%len(pubs)],
			date:      fmt.Sprintf("%d %s %d", 1+i%28, []string{"January", "March", "May", "July", "October"}[i%5], 1990+i%30),
		})
		if i%3 == 0 {
			// A third of the books have two authors.
			out[i].authors = append(out[i].authors, first[(i+3)%len(first)]+" "+last[(i+5)%len(last)])
		}
	}
	return out
}

// shopPage is a product page of about 150 KB, as shops make them: a
// navigation of hundreds of links, the details in a table, a long
// description, a JSON state script, reviews and a carousel of related
// books (other titles, authors and publishers: decoys).
func shopPage(b shopBook, i int, all []shopBook) string {
	var s strings.Builder
	s.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>")
	s.WriteString(b.title + " – Shop</title></head><body><header><nav class=\"menu\"><ul>")
	for k := 0; k < 400; k++ {
		fmt.Fprintf(&s, "<li class=\"menu-item\"><a href=\"/category/%d\">Category %d</a></li>", k, k)
	}
	s.WriteString("</ul></nav></header><main><div class=\"product\">")
	fmt.Fprintf(&s, "<h1 class=\"product-title\">%s</h1><p class=\"byline\">by %s</p>", b.title, strings.Join(b.authors, " and "))
	fmt.Fprintf(&s, "<table class=\"details\"><tr><th>Authors</th><td>%s</td></tr>", strings.Join(b.authors, "; "))
	fmt.Fprintf(&s, "<tr><th>ISBN</th><td>%s</td></tr><tr><th>Publisher</th><td>%s</td></tr><tr><th>Published</th><td>%s</td></tr><tr><th>Pages</th><td>%d</td></tr><tr><th>Language</th><td>English</td></tr></table>",
		b.isbn, b.publisher, b.date, 200+i)
	s.WriteString("<div class=\"description\">")
	for k := 0; k < 170; k++ {
		fmt.Fprintf(&s, "<p>Paragraph %d of a long description that tells the story of the book, its themes and its many characters, and why readers love it so.</p>", k)
	}
	s.WriteString("</div></div><section class=\"reviews\">")
	for k := 0; k < 420; k++ {
		fmt.Fprintf(&s, "<div class=\"review\"><span class=\"stars\">%d</span><p>Review %d: a fine read, recommended to every reader of the genre.</p></div>", 1+k%5, k)
	}
	s.WriteString("</section><section class=\"related\"><ul>")
	for k := 1; k <= 150; k++ {
		o := all[(i+k)%len(all)]
		fmt.Fprintf(&s, "<li class=\"card\"><a href=\"/book/%d\">%s</a><span class=\"card-author\">%s</span><span class=\"card-publisher\">%s</span><span class=\"price\">%d.99</span></li>", (i+k)%len(all), o.title, strings.Join(o.authors, ", "), o.publisher, 5+k%20)
	}
	s.WriteString("</ul></section></main><script>window.__STATE__ = {\"cart\":[],\"flags\":{")
	for k := 0; k < 600; k++ {
		fmt.Fprintf(&s, "\"flag%d\":%t,", k, k%2 == 0)
	}
	s.WriteString("\"end\":true}};</script><footer>")
	for k := 0; k < 200; k++ {
		fmt.Fprintf(&s, "<a class=\"footer-link\" href=\"/page/%d\">Page %d</a> ", k, k)
	}
	s.WriteString("</footer></body></html>")
	return s.String()
}

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
		body := shopPage(bk, i, books)
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
