// Command httploop is the benchmark's ceiling: a fixed pool of goroutines
// GETting every URL of a list and reading each body to the end, with no
// parsing, politeness or state. Whatever a crawler does beyond this costs
// pages per second; this is what the machine and the fixture web allow.
// It prints one JSON summary line on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Summary is what the benchmark reads back.
type Summary struct {
	Pages  int64 `json:"pages"`  // 2xx responses read to the end
	Errors int64 `json:"errors"` // failed requests and other statuses
	Bytes  int64 `json:"bytes"`  // body bytes read
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "httploop:", err)
		os.Exit(1)
	}
}

func run() error {
	urlsFile := flag.String("urls", "", "file of URLs, one a line (required)")
	resolveFile := flag.String("resolve", "", "file of host:port:address:port lines; connections to host:port go to address:port")
	workers := flag.Int("workers", 16, "concurrent requests")
	userAgent := flag.String("user-agent", "backfill-bench/1 (+https://backfill.invalid/about-the-crawler)", "User-Agent")
	timeout := flag.Duration("timeout", 30*time.Second, "deadline for one request")
	flag.Parse()
	if *urlsFile == "" {
		return fmt.Errorf("-urls is required")
	}
	urls, err := readLines(*urlsFile)
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
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if to, ok := resolve[strings.ToLower(addr)]; ok {
					addr = to
				}
				return dialer.DialContext(ctx, network, addr)
			},
			MaxIdleConns:        2 * *workers, // the list goes host by host: keep only the current hosts' connections
			MaxIdleConnsPerHost: *workers,
			IdleConnTimeout:     90 * time.Second,
		},
	}

	var sum Summary
	work := make(chan string)
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for u := range work {
				n, err := get(client, u, *userAgent)
				if err != nil {
					atomic.AddInt64(&sum.Errors, 1)
					continue
				}
				atomic.AddInt64(&sum.Pages, 1)
				atomic.AddInt64(&sum.Bytes, n)
			}
		})
	}
	for _, u := range urls {
		work <- u
	}
	close(work)
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(sum)
}

func get(client *http.Client, u, userAgent string) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return n, err
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
