package dispatcher

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"backfill/wire"
)

// TestHostLeft counts pages left per host and depth through what the
// crawl does to them: queued, answered, dropped from a depth they did not
// have, reached by a shorter way, and hosts folded past the cap.
func TestHostLeft(t *testing.T) {
	l := newHostLeft()
	steps := []struct {
		name      string
		do        func()
		host      string
		byDepth   []int32 // the host's count by depth; nil: not counted one by one
		total     int
		atDepth   []int
		hostsLeft int
	}{
		{"queued", func() { l.add("a.example", 0, 2); l.add("a.example", 1, 1) }, "a.example", []int32{2, 1}, 3, []int{2, 1}, 1},
		{"another host", func() { l.add("b.example:8080", 2, 1) }, "b.example:8080", []int32{0, 0, 1}, 4, []int{2, 1, 1}, 2},
		{"answered", func() { l.add("a.example", 0, -1) }, "a.example", []int32{1, 1}, 3, []int{1, 1, 1}, 2},
		{"reached sooner", func() { l.moveDepth("a.example", 1, 0) }, "a.example", []int32{2, 0}, 3, []int{2, 0, 1}, 2},
		{"dropped from a depth it had left", func() { l.add("a.example", 1, -1) }, "a.example", []int32{1, 0}, 2, []int{2, 0, 1}, 2},
		{"last page answered", func() { l.add("b.example:8080", 2, -1) }, "b.example:8080", nil, 1, []int{2, 0, 0}, 1},
		{"a host never counted", func() { l.add("c.example", 0, -1) }, "c.example", nil, 1, []int{1, 0, 0}, 1},
		{"no host", func() { l.add("", 0, 5) }, "", nil, 1, []int{1, 0, 0}, 1},
	}
	for _, s := range steps {
		s.do()
		got, ok := l.get(s.host)
		if (s.byDepth == nil) == ok || (ok && !equalInts(got[:], s.byDepth)) {
			t.Errorf("%s: %s has %v (counted %v), want %v", s.name, s.host, got, ok, s.byDepth)
		}
		if l.total != s.total || !equalInts(l.atDepth, s.atDepth) || len(l.n)+l.folded != s.hostsLeft {
			t.Errorf("%s: total %d by depth %v over %d hosts, want %d, %v, %d", s.name, l.total, l.atDepth, len(l.n)+l.folded, s.total, s.atDepth, s.hostsLeft)
		}
	}

	// Past leftCap, hosts with one page left are counted together; their
	// pages still count, and are taken from the fold when answered.
	l = newHostLeft()
	l.add("big.example", 0, 3)
	for i := range leftCap + 1 {
		l.add(linkHost("http://h"+strconv.Itoa(i)+".example/"), 0, 1)
	}
	big, _ := l.get("big.example")
	if len(l.n) > leftCap || l.folded == 0 || l.total != leftCap+4 || pages(big) != 3 {
		t.Fatalf("past the cap: %d hosts counted, %d folded, %d pages, big.example %v", len(l.n), l.folded, l.total, big)
	}
	folded := l.folded
	for i := range leftCap + 1 {
		l.add("h"+strconv.Itoa(i)+".example", 0, -1)
	}
	if l.total != 3 || l.folded != 0 || len(l.n) != 1 {
		t.Errorf("after every folded host's page: %d pages, %d folded (of %d), %d hosts", l.total, l.folded, folded, len(l.n))
	}

	// The names of hosts gone are let go of once they are most of the
	// arena; those left keep theirs.
	for i := range 100_000 {
		l.add("gone-"+strconv.Itoa(i)+".example", 0, 1)
		l.add("gone-"+strconv.Itoa(i)+".example", 0, -1)
	}
	l.add("new.example", 1, 2)
	var names []string
	for _, e := range l.n {
		names = append(names, l.name(e))
	}
	slices.Sort(names)
	if len(l.names) >= 1<<20 || !slices.Equal(names, []string{"big.example", "new.example"}) {
		t.Errorf("after 100,000 hosts came and went: %d bytes of names, hosts %q", len(l.names), names)
	}
}

func equalInts[T int | int32](a, b []T) bool {
	for len(a) > 0 && a[len(a)-1] == 0 {
		a = a[:len(a)-1]
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLinkHost: a plain normalized URL's host is read off its text, and
// agrees with hostDomain's; anything else goes through hostDomain.
func TestLinkHost(t *testing.T) {
	for _, u := range []string{
		"http://a.example/people/1", "https://a.example:8443/x?y", "http://a.example", "http://a.example?q",
		"http://user@a.example/", "http://A.Example/x", "http://[::1]:8080/x", "http://127.0.0.1/x", "not a url", "",
	} {
		want, _ := hostDomain(u)
		if got := linkHost(u); got != want {
			t.Errorf("linkHost(%q) = %q, hostDomain says %q", u, got, want)
		}
	}
}

// TestETA: the bound from the pages left per host, before the crawl (the
// default delay of Config, as run --dry-run has it), once a supervisor
// says its own default delay and workers, and once a host's results say
// its delay; the status, the progress reports and /metrics carry it, and
// a dispatcher resumed on the state counts the same pages left.
func TestETA(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, func(c *Config) { c.DefaultDelay = 10 * time.Second; c.Depth = 0 })
	e.load("r.csv", csvOf("id,name,email,link",
		"r1,Ada,,http://a.example/1", "r2,Bo,,http://a.example/2", "r3,Cy,,http://a.example/3", "r4,Di,,http://b.example/1"))

	// Before any supervisor: a.example has 3 pages, its robots.txt and its
	// soft-404 probe, one every 10 s; b.example a page and its robots.txt.
	eta := e.d.ETA()
	checkETA(t, "loaded", eta, ETA{Seconds: 40, Host: "a.example", HostRequests: 5, HostCycle: 10, HostSeconds: 40,
		Requests: 7, Pages: 4, Hosts: 2, Rate: 0.2, RateSeconds: 35})
	if s := eta.String(); !strings.Contains(s, "host a.example") || !strings.Contains(s, "≥ 40s") {
		t.Errorf("ETA reads %q", s)
	}

	// The supervisor's own default delay replaces Config's.
	sup := newSup(t, "s1", e.d.Endpoint(), 8, false, e.set.Digest())
	sup.Hello.DefaultDelay, sup.Hello.Workers = 20*time.Second, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.run(ctx)
	if !sup.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	checkETA(t, "joined", e.d.ETA(), ETA{Seconds: 80, Host: "a.example", HostRequests: 5, HostCycle: 20, HostSeconds: 80,
		Requests: 7, Pages: 4, Hosts: 2, Rate: 0.1, RateSeconds: 70, Workers: 4})

	// a.example answers one page saying it keeps 1 s: its robots.txt is
	// asked, and b.example bounds the crawl now.
	sup.pace = func(wire.Task) (time.Duration, time.Duration) { return time.Second, time.Second }
	web := map[string]page{}
	deadline := time.Now().Add(10 * time.Second)
	for eta = e.d.ETA(); eta.Pages == 4 && time.Now().Before(deadline); eta = e.d.ETA() {
		sup.poll(20 * time.Millisecond)
		for _, task := range sup.held {
			if task.Host == "a.example" && eta.Pages == 4 {
				sup.answer(task, web)
				sup.held = nil
			}
		}
	}
	if eta.Pages != 3 || eta.Host != "b.example" || eta.HostRequests != 2 || math.Abs(eta.HostSeconds-(20+2*eta.Response)) > 1e-9 {
		t.Errorf("after a.example's first answer: %+v, want b.example bounding with 2 requests one every 20 s", eta)
	}
	// The status and the metrics work it out at most every etaEvery.
	st := e.d.Status()
	for deadline := time.Now().Add(5 * etaEvery); st.ETA.Pages != 3 && time.Now().Before(deadline); st = e.d.Status() {
		sup.poll(20 * time.Millisecond)
	}
	if st.ETA.Pages != 3 || st.ETA.Host != "b.example" {
		t.Errorf("status ETA %+v", st.ETA)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.d.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{"backfill_eta_host_seconds/b.example": st.ETA.HostSeconds,
		"backfill_requests_left": float64(st.ETA.Requests), "backfill_hosts_with_work": 2} {
		if v, ok := got[name]; !ok || math.Abs(v-want) > 1e-9 {
			t.Errorf("metric %s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if got["backfill_eta_seconds"] < st.ETA.Seconds || got["backfill_eta_estimate_seconds"] < got["backfill_eta_seconds"] {
		t.Errorf("metrics: eta %v, estimate %v; status bound %v", got["backfill_eta_seconds"], got["backfill_eta_estimate_seconds"], st.ETA.Seconds)
	}

	// A dispatcher resumed on the state (the first one stopped with 3
	// pages left) counts them again.
	cancel()
	e.close()
	e2 := newEnv(t, dir, func(c *Config) { c.DefaultDelay = 10 * time.Second; c.Depth = 0 })
	if eta := e2.d.ETA(); eta.Pages != 3 || eta.Hosts != 2 {
		t.Errorf("resumed: %d pages on %d hosts left, want 3 on 2", eta.Pages, eta.Hosts)
	}
}

// checkETA compares the counts and times of an ETA with want's; the mean
// response time is what the results said, a moment, and counts in the
// cycles.
func checkETA(t *testing.T, when string, got, want ETA) {
	t.Helper()
	rt := got.Response
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6+4*rt*max(1, float64(got.HostRequests)) }
	if got.Host != want.Host || got.HostRequests != want.HostRequests || got.Requests != want.Requests ||
		got.Pages != want.Pages || got.Hosts != want.Hosts || got.Workers != want.Workers ||
		!near(got.Seconds, want.Seconds) || !near(got.HostSeconds, want.HostSeconds) || !near(got.HostCycle, want.HostCycle) ||
		!near(got.RateSeconds, want.RateSeconds) {
		t.Errorf("%s: ETA %+v, want %+v", when, got, want)
	}
}
