// Command collycrawl is the benchmark's comparison crawler: the same crawl
// backfill does (records' links plus the links found on those pages, robots.txt
// obeyed, the same XPath extraction on pages the mappings match) written
// with the colly collector, run as its own process so its peak memory is
// measured alone. It prints one JSON summary line on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
	"golang.org/x/net/html"
)

// Summary is what the benchmark reads back.
type Summary struct {
	Pages     int64 `json:"pages"`     // responses handled (robots.txt excluded)
	Errors    int64 `json:"errors"`    // failed requests
	Extracted int64 `json:"extracted"` // pages where a mapping field yielded a value
	Fields    int64 `json:"fields"`    // field values found
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "collycrawl:", err)
		os.Exit(1)
	}
}

func run() error {
	seedsFile := flag.String("seeds", "", "file of seed URLs, one a line (required)")
	resolveFile := flag.String("resolve", "", "file of host:port:address:port lines; connections to host:port go to address:port")
	mappingsDir := flag.String("mappings", "", "directory of site mappings (required)")
	mappingsGlob := flag.String("mappings-glob", "testweb-*.json", "which mapping files to load")
	parallelism := flag.Int("parallelism", 16, "concurrent requests")
	depth := flag.Int("depth", 1, "links followed away from the seeds")
	userAgent := flag.String("user-agent", "backfill-bench/1 (+https://backfill.invalid/about-the-crawler)", "User-Agent")
	timeout := flag.Duration("timeout", 30*time.Second, "deadline for one request")
	flag.Parse()
	if *seedsFile == "" || *mappingsDir == "" {
		return fmt.Errorf("-seeds and -mappings are required")
	}
	seeds, err := readLines(*seedsFile)
	if err != nil {
		return err
	}
	resolve := map[string]string{}
	if *resolveFile != "" {
		lines, err := readLines(*resolveFile)
		if err != nil {
			return err
		}
		for i, l := range lines {
			parts := strings.SplitN(l, ":", 3)
			if len(parts) != 3 {
				return fmt.Errorf("%s:%d: want host:port:address:port, got %q", *resolveFile, i+1, l)
			}
			resolve[strings.ToLower(parts[0])+":"+parts[1]] = parts[2]
		}
	}
	set, err := loadMappings(*mappingsDir, *mappingsGlob)
	if err != nil {
		return err
	}

	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := resolve[strings.ToLower(addr)]; ok {
				addr = to
			}
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:          0, // no overall cap: the per-host cap below governs
		MaxIdleConnsPerHost:   *parallelism,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: *timeout,
	}

	c := colly.NewCollector(
		colly.Async(true),
		colly.MaxDepth(*depth+1), // colly counts the seeds as depth 1
		colly.UserAgent(*userAgent),
	)
	c.IgnoreRobotsTxt = false
	c.WithTransport(transport)
	c.SetRequestTimeout(*timeout)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: *parallelism}); err != nil {
		return fmt.Errorf("limit rule: %w", err)
	}

	var sum Summary
	c.OnResponse(func(r *colly.Response) { atomic.AddInt64(&sum.Pages, 1) })
	c.OnError(func(r *colly.Response, err error) {
		atomic.AddInt64(&sum.Errors, 1)
		if r != nil && r.StatusCode != 0 {
			atomic.AddInt64(&sum.Pages, 1) // a response came back, just not a 2xx
		}
	})
	// One parse per page: colly parses the body once for all XML callbacks;
	// the root callback runs the mappings and collects the links.
	c.OnXML("/", func(e *colly.XMLElement) {
		doc, ok := e.DOM.(*html.Node)
		if !ok {
			return
		}
		fields, links := set.extract(e.Request.URL.String(), doc)
		if len(fields) > 0 {
			atomic.AddInt64(&sum.Extracted, 1)
			atomic.AddInt64(&sum.Fields, int64(len(fields)))
		}
		for _, l := range links {
			visit(e.Request, l)
		}
	})
	// Every outbound link is followed, as backfill follows a page's links.
	c.OnXML("//a[@href] | //area[@href]", func(e *colly.XMLElement) {
		visit(e.Request, e.Attr("href"))
	})

	for _, s := range seeds {
		_ = c.Visit(s) // a repeated seed is refused as already visited
	}
	c.Wait()
	return json.NewEncoder(os.Stdout).Encode(sum)
}

// visit follows href from the page of r. Refusals (already visited, too
// deep, disallowed) are the expected outcome for most links.
func visit(r *colly.Request, href string) {
	link := r.AbsoluteURL(href)
	if strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") {
		_ = r.Visit(link)
	}
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
