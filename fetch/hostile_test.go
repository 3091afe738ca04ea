package fetch_test

import (
	"context"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"backfill/fetch"
	"backfill/testweb"
)

// The hostile site's cases, fetched one subtest each through a single
// Fetcher, as a supervisor shares one among its workers. Each asserts the
// class, the case's extra expectations, and a time bound computed from the
// configured deadlines; the slow ones also fetch a well-behaved host while
// they hang, to show a stuck host holds nothing else up.

const hostileUA = "backfill-test/1.0 (+http://backfill.example/contact)"

// hostileConfig is a fetcher as tests configure one: loopback allowed,
// the default size limits, and deadlines of a few seconds, so the slow
// cases end quickly yet a healthy page is never cut off on a machine busy
// with the race detector and other packages' tests. The first-byte,
// idle and total deadlines are strictly ordered, so that exactly the one
// a slow case names is the first to fire. TrickleGap (100 ms) is well inside IdleTimeout, so
// the trickled cases are ended by the deadlines their Case names.
func hostileConfig(h *testweb.Hostile) fetch.Config {
	return fetch.Config{
		UserAgent:      hostileUA,
		AllowLoopback:  true,
		Resolve:        h.Resolve(),
		Timeout:        4 * time.Second,
		DNSTimeout:     2 * time.Second,
		ConnectTimeout: 2 * time.Second,
		TLSTimeout:     2 * time.Second,
		HeaderTimeout:  2 * time.Second,
		IdleTimeout:    3 * time.Second,
	}
}

// slack is added to a deadline before a fetch that outlives it counts as
// hung: room for a loaded machine under the race detector (decoding a
// 5 MiB body is CPU work no deadline interrupts), far less than any
// default deadline.
const slack = 3 * time.Second

// deadlineOf returns the configured deadline that ends a slow case.
func deadlineOf(t *testing.T, cfg fetch.Config, c testweb.Case) time.Duration {
	switch c.Deadline {
	case testweb.DeadlineFirstByte:
		return cfg.HeaderTimeout
	case testweb.DeadlineIdle:
		return cfg.IdleTimeout
	case testweb.DeadlineTotal:
		return cfg.Timeout
	}
	t.Fatalf("slow case %s names no known deadline (%q)", c.Name, c.Deadline)
	return 0
}

// deadlineWords is how the fetcher's error names each deadline.
var deadlineWords = map[string]string{
	testweb.DeadlineFirstByte: "awaiting response headers",
	testweb.DeadlineIdle:      "silent",
	testweb.DeadlineTotal:     "total time limit",
}

func startHostile(t *testing.T) *testweb.Hostile {
	t.Helper()
	h, err := testweb.StartHostile(testweb.HostileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close hostile site: %v", err)
		}
	})
	return h
}

func caseNamed(t *testing.T, h *testweb.Hostile, name string) testweb.Case {
	t.Helper()
	for _, c := range h.Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("hostile site has no case %q", name)
	return testweb.Case{}
}

// goroutinesSettle fails t unless the goroutine count falls back to base
// (polled, since connection goroutines exit just after their sockets
// close).
func goroutinesSettle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutines: %d before, %d after everything closed\n%s",
				base, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestHostile(t *testing.T) {
	base := runtime.NumGoroutine()
	h := startHostile(t)
	cfg := hostileConfig(h)
	requireGuard(t, h, cfg)

	f := fetch.New(cfg)
	control := caseNamed(t, h, testweb.ControlCase)
	var ran sync.Map // names of the cases fetched, for checkLog
	run := func(t *testing.T, c testweb.Case) {
		ran.Store(c.Name, true)
		fetchCase(t, f, cfg, c, control)
	}
	t.Run("case", func(t *testing.T) {
		var slow []testweb.Case
		for _, c := range h.Cases() {
			if c.Slow {
				slow = append(slow, c)
				continue
			}
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				run(t, c)
			})
		}
		// Each slow case waits out a deadline. They run side by side in
		// one parallel slot, so the file takes the longest deadline rather
		// than their sum, while the fast cases go on in the other slots.
		t.Run("slow", func(t *testing.T) {
			t.Parallel()
			var wg sync.WaitGroup
			for _, c := range slow {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t.Run(c.Name, func(t *testing.T) { run(t, c) })
				}()
			}
			wg.Wait()
		})
		t.Run("bad-tls-insecure", func(t *testing.T) {
			t.Parallel()
			ran.Store("bad-tls", true)
			insecureTLS(t, h, cfg)
		})
	})
	checkLog(t, h, func(name string) bool { _, ok := ran.Load(name); return ok })

	f.Close()
	if err := h.Close(); err != nil {
		t.Errorf("close hostile site: %v", err)
	}
	goroutinesSettle(t, base)
}

// fetchCase fetches one case and checks everything it promises.
func fetchCase(t *testing.T, f *fetch.Fetcher, cfg fetch.Config, c, control testweb.Case) {
	// The bound: the whole-fetch deadline plus slack, enforced as the
	// caller's context deadline so a hang fails the test instead of
	// stalling it.
	bound := cfg.Timeout + slack
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()

	var during *controlRun
	if c.Slow {
		during = startControl(f, control.URL)
	}
	start := time.Now()
	resp, err := f.Get(ctx, c.URL)
	elapsed := time.Since(start)
	if during != nil {
		during.stop(t, start, start.Add(elapsed))
	}

	// Our context ending means the fetcher's own deadlines did not end
	// the fetch. (The error cannot tell: net/http's header timeout also
	// matches context.DeadlineExceeded.)
	if ctx.Err() != nil {
		t.Fatalf("Get outlived its bound %v (Timeout %v + %v): ran %v, err %v", bound, cfg.Timeout, slack, elapsed, err)
	}
	if got := string(fetch.ClassOf(err)); got != c.WantClass {
		t.Fatalf("class %q, want %q (after %v; err: %v)\ncase: %s", got, c.WantClass, elapsed.Round(time.Millisecond), err, c.Note)
	}
	if c.Slow {
		if d := deadlineOf(t, cfg, c); elapsed > d+slack {
			t.Errorf("took %v; the %s deadline is %v", elapsed, c.Deadline, d)
		}
		// The deadline the case names is the one that fired.
		if w := deadlineWords[c.Deadline]; !strings.Contains(err.Error(), w) {
			t.Errorf("want the %s deadline (%q) named, got %v", c.Deadline, w, err)
		}
	}
	// A fast case that waited on a deadline would have ended as a
	// timeout, which the class check above catches; its elapsed time
	// depends on the machine's load and is not checked.
	if err != nil && !strings.Contains(err.Error(), c.URL) {
		t.Errorf("error does not name the URL %s: %v", c.URL, err)
	}

	switch fetch.Class(c.WantClass) {
	case "":
		if resp == nil {
			t.Fatalf("no response for a successful fetch")
		}
	case fetch.ClassStatus, fetch.ClassNotHTML:
		if resp == nil {
			t.Fatalf("class %s must come with the response", c.WantClass)
		}
	default:
		if resp != nil {
			t.Errorf("class %s came with a response: %+v", c.WantClass, resp)
		}
		return
	}

	for k, vs := range resp.Header {
		for _, v := range vs {
			if !utf8.ValidString(v) {
				t.Errorf("header %s value %q is not valid UTF-8", k, v)
			}
		}
	}
	if fetch.Class(c.WantClass) == fetch.ClassNotHTML {
		if strings.HasPrefix(resp.ContentType, "text/") || resp.Charset != "" {
			t.Errorf("binary body reported as %q, charset %q", resp.ContentType, resp.Charset)
		}
		return
	}
	if !utf8.Valid(resp.Body) {
		t.Errorf("text body is not valid UTF-8")
	}
	if c.WantStatus != 0 && resp.Status != c.WantStatus {
		t.Errorf("status %d, want %d", resp.Status, c.WantStatus)
	}
	if resp.Truncated != c.WantTruncated {
		t.Errorf("truncated %v, want %v (%d bytes kept)", resp.Truncated, c.WantTruncated, len(resp.Body))
	}
	// UTF-8 may spell a single-byte charset's letter in up to three bytes;
	// anything more means the body limit did not hold.
	if int64(len(resp.Body)) > 3*fetch.DefaultMaxBody {
		t.Errorf("kept %d bytes, past the %d-byte limit", len(resp.Body), fetch.DefaultMaxBody)
	}
	if c.WantCharset != "" && resp.Charset != c.WantCharset {
		t.Errorf("decoded from %q, want %q; body starts %q", resp.Charset, c.WantCharset, head(resp.Body))
	}
	if c.WantText != "" && !strings.Contains(string(resp.Body), c.WantText) {
		t.Errorf("body lacks %q; starts %q", c.WantText, head(resp.Body))
	}
	if c.WantBody != "" && string(resp.Body) != c.WantBody {
		t.Errorf("body %q, want exactly %q", head(resp.Body), c.WantBody)
	}
	if c.WantURL != "" && resp.URL != c.WantURL {
		t.Errorf("ended at %s, want %s (%d redirects)", resp.URL, c.WantURL, resp.Redirects)
	}
}

func head(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// controlRun fetches the control host over and over while a slow case
// hangs, on the same Fetcher.
type controlRun struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	ends []time.Time // when each successful fetch finished
	errs []error
}

// controlEvery paces the control fetches, so that a few of them fall
// inside every slow case without flooding a loaded machine.
const controlEvery = 100 * time.Millisecond

func startControl(f *fetch.Fetcher, u string) *controlRun {
	r := &controlRun{quit: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(controlEvery)
		defer tick.Stop()
		for {
			// The fetcher's own deadlines bound each control fetch;
			// promptness is judged by how many finish while the slow
			// case hangs (see stop).
			_, err := f.Get(context.Background(), u)
			r.mu.Lock()
			if err != nil {
				r.errs = append(r.errs, err)
			} else {
				r.ends = append(r.ends, time.Now())
			}
			r.mu.Unlock()
			select {
			case <-r.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// stop ends the control fetches and checks them: none failed, and at least
// three finished while the slow fetch was in flight, from slowStart to
// slowEnd.
func (r *controlRun) stop(t *testing.T, slowStart, slowEnd time.Time) {
	t.Helper()
	close(r.quit)
	r.wg.Wait()
	for _, err := range r.errs {
		t.Errorf("control host failed while this case hung: %v", err)
	}
	during := 0
	for _, e := range r.ends {
		if e.After(slowStart) && e.Before(slowEnd) {
			during++
		}
	}
	if during < 3 {
		t.Errorf("only %d control fetches finished while this case hung; want at least 3", during)
	}
}

// requireGuard checks, before anything is fetched with loopback allowed,
// that the address guard refuses a loopback address when loopback is not
// allowed, without a connection: cases map names to 10.0.0.1 and redirect
// to 169.254.169.254, and a broken guard must fail here, not dial out.
// It also judges localhost by configuration: the landing pages that
// redirect-loopback and redirect-localhost reach under the test
// configuration are refused without AllowLoopback.
func requireGuard(t *testing.T, h *testweb.Hostile, cfg fetch.Config) {
	t.Helper()
	strict := cfg
	strict.AllowLoopback = false
	f := fetch.New(strict)
	defer f.Close()
	urls := []string{caseNamed(t, h, testweb.ControlCase).URL}
	for _, name := range []string{"redirect-loopback", "redirect-localhost"} {
		c := caseNamed(t, h, name)
		u, err := url.Parse(c.WantURL)
		if err != nil || (u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1") {
			t.Fatalf("case %s: WantURL %q is not a loopback target", name, c.WantURL)
		}
		urls = append(urls, c.WantURL)
	}
	before := len(h.Log())
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+slack)
		_, err := f.Get(ctx, u)
		cancel()
		if fetch.ClassOf(err) != fetch.ClassBlocked {
			t.Fatalf("without AllowLoopback, %s: class %q, want %q (err: %v); not running cases that point at private addresses",
				u, fetch.ClassOf(err), fetch.ClassBlocked, err)
		}
	}
	if after := h.Log(); len(after) != before {
		t.Fatalf("a refused address was dialed anyway: %+v", after[before:])
	}
}

// insecureTLS fetches the bad certificate case with InsecureTLS: the page
// is fetched and the problem recorded.
func insecureTLS(t *testing.T, h *testweb.Hostile, cfg fetch.Config) {
	c := caseNamed(t, h, "bad-tls")
	cfg.InsecureTLS = true
	f := fetch.New(cfg)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+slack)
	defer cancel()
	resp, err := f.Get(ctx, c.URL)
	if err != nil {
		t.Fatalf("InsecureTLS fetch of %s: %v", c.URL, err)
	}
	if resp.TLSError == "" || !strings.Contains(string(resp.Body), "self-signed") {
		t.Errorf("TLSError %q, body %q", resp.TLSError, head(resp.Body))
	}
}

// checkLog compares the site's request log with the cases that ran: every
// case host was asked for its page by our User-Agent (the bad certificate host by the
// InsecureTLS fetch), except the private-address one, which nothing can
// reach.
func checkLog(t *testing.T, h *testweb.Hostile, ran func(name string) bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range h.Log() {
		if r.UserAgent != hostileUA {
			t.Errorf("request %s%s from User-Agent %q", r.Host, r.Path, r.UserAgent)
		}
		seen[r.Host] = true
	}
	for _, c := range h.Cases() {
		if !ran(c.Name) {
			continue // filtered out by -run
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			t.Fatalf("case %s: bad URL %q", c.Name, c.URL)
		}
		unreachable := c.Name == "dns-private"
		if unreachable == seen[u.Hostname()] {
			t.Errorf("case %s: host %s in the log: %v, want %v", c.Name, u.Hostname(), seen[u.Hostname()], !unreachable)
		}
	}
}
