package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// The crash tests crawl a generated web long enough that a kill lands
// mid-crawl: every host asks for a Crawl-delay, so a host's pages take
// (pages + robots.txt + index + soft-404 probe) × delay to crawl, whatever
// the number of workers.
const (
	crashHosts = 12
	crashPages = 16
	crashDelay = 500 * time.Millisecond
	// crashRequests is how many requests an uninterrupted crawl makes.
	crashRequests = crashHosts * (crashPages + 3)
	// crashLease is the dispatcher's lease: far longer than a test, so a
	// page fetched twice is never explained by an expired lease.
	crashLease = "30s"
	// crashMemberLease and crashTimeout bound how long the hosts of a
	// supervisor lost wait before another one asks them anything (its
	// lease, then its longest request): short, so that the crawl goes on
	// within the test's patience.
	crashMemberLease = "6s"
	crashTimeout     = "5s"
)

// crashWeb is the generated web of one crash test and the records crawled
// over it. Each host's record names the owner of its last profile, so
// attribution accepts that profile's location and email alone: the truth
// is read from that page before the crawl starts.
type crashWeb struct {
	web     *testweb.Web
	records []byte
	truth   map[string]map[string]string // record id → field → value
	from    int                          // first request of the crawl in web.Log()
}

var (
	profileName     = regexp.MustCompile(`<h1 class="fn">\s*([^<]*?)\s*</h1>`)
	profileLocation = regexp.MustCompile(`<p class="location">([^<]*)</p>`)
	profileEmail    = regexp.MustCompile(`class="email" href="mailto:([^"]*)"`)
)

func startCrashWeb(t *testing.T) *crashWeb {
	t.Helper()
	return startCrashWebOf(t, crashHosts, crashPages)
}

// startCrashWebOf is startCrashWeb with hosts hosts of pages profiles.
func startCrashWebOf(t *testing.T, hosts, pages int) *crashWeb {
	t.Helper()
	return startCrashWebWith(t, testweb.LargeOptions{Hosts: hosts, Pages: pages, CrawlDelay: crashDelay})
}

// startCrashWebWith is startCrashWeb on the web opts describes.
func startCrashWebWith(t *testing.T, opts testweb.LargeOptions) *crashWeb {
	t.Helper()
	pages := opts.Pages
	web, err := testweb.StartLarge(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	cw := &crashWeb{web: web, truth: map[string]map[string]string{}}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"id", "name", "location", "email", "homepage"})
	client := &http.Client{Timeout: 10 * time.Second}
	for _, host := range web.Hosts() {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/p/%04d", web.Addr(), pages), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, re := range []*regexp.Regexp{profileName, profileLocation, profileEmail} {
			m := re.FindSubmatch(body)
			if m == nil {
				t.Fatalf("profile %s/p/%04d: no match for %s in\n%s", host, pages, re, body)
			}
			got = append(got, html.UnescapeString(string(m[1])))
		}
		cw.truth[host] = map[string]string{"location": got[1], "email": got[2]}
		w.Write([]string{host, got[0], "", "", "http://" + host + "/"})
	}
	w.Flush()
	cw.records = b.Bytes()
	cw.from = len(web.Log())
	return cw
}

// requests returns the crawl's requests so far.
func (w *crashWeb) requests() []testweb.Request { return w.web.Log()[w.from:] }

// crashEvent is a process killed with SIGKILL.
type crashEvent struct {
	at  time.Time // when the process was gone
	who string    // "dispatcher", or the killed supervisor's contact URL
}

// cluster is one crawl run as separate OS processes: a dispatcher on a
// fixed loopback port (so a restarted one is found where the old one was)
// and named supervisors, each incarnation with its own contact URL in the
// User-Agent, so the request log tells who made every request.
type cluster struct {
	t           *testing.T
	w           *crashWeb
	recordsPath string
	stateDir    string
	storePath   string
	summaryPath string
	listen      string

	disp    *process
	dispN   int
	sups    map[string]*process
	contact map[string]string // supervisor name → contact of its live incarnation
	born    map[string]int
	events  []crashEvent
}

func newCluster(t *testing.T, w *crashWeb) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{
		t: t, w: w,
		recordsPath: filepath.Join(dir, "records.csv"),
		stateDir:    filepath.Join(dir, "state"),
		summaryPath: filepath.Join(dir, "summary.json"),
		sups:        map[string]*process{},
		contact:     map[string]string{},
		born:        map[string]int{},
	}
	c.storePath = filepath.Join(c.stateDir, "results.db")
	if err := os.WriteFile(c.recordsPath, w.records, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.listen = "tcp://" + ln.Addr().String()
	ln.Close()
	return c
}

// startDispatcher starts (or restarts, on the same state) the dispatcher
// and waits until it listens.
func (c *cluster) startDispatcher() {
	c.t.Helper()
	c.dispN++
	c.disp = start(c.t, fmt.Sprintf("dispatcher-%d", c.dispN), "dispatcher",
		"--records", c.recordsPath, "--state-dir", c.stateDir, "--listen", c.listen,
		"--lease", crashLease, "--member-lease", crashMemberLease, "--expect", "2", "--summary", c.summaryPath)
	if _, ok := c.disp.stderr.wait(regexp.MustCompile(`dispatcher listening`), time.Now().Add(time.Minute)); !ok {
		c.t.Fatalf("%s never said it listens", c.disp.name)
	}
}

// startSupervisor starts a new incarnation of supervisor name.
func (c *cluster) startSupervisor(name string) {
	c.t.Helper()
	c.born[name]++
	contact := fmt.Sprintf("https://backfill.invalid/crash/%s/%d", name, c.born[name])
	args := []string{"supervisor", "--dispatcher", c.listen, "--store", c.storePath, "--name", name,
		"--allow-loopback", "--delay", "2s", "--workers", "4", "--timeout", crashTimeout, "--contact", contact}
	for host, addr := range c.w.web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	c.sups[name] = start(c.t, fmt.Sprintf("%s-%d", name, c.born[name]), args...)
	c.contact[name] = contact
}

// kill sends SIGKILL and waits until the process is gone.
func (c *cluster) kill(p *process, who string) {
	c.t.Helper()
	select {
	case <-p.done:
		c.t.Fatalf("%s ended before it could be killed:\n%s", p.name, p.stderr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
	c.events = append(c.events, crashEvent{at: time.Now(), who: who})
	c.t.Logf("killed %s after %d requests", p.name, len(c.w.requests()))
}

func (c *cluster) killDispatcher() { c.kill(c.disp, "dispatcher") }

// freezeDispatcher stops the dispatcher (SIGSTOP) without ending it: its
// sockets stay open, so what the supervisors send it is taken by the
// system and waits there, unread, until it is killed.
func (c *cluster) freezeDispatcher() {
	c.t.Helper()
	if err := c.disp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("stop %s: %v", c.disp.name, err)
	}
}

// waitMember waits until the running dispatcher has taken the running
// incarnation of supervisor name as a member: only a member can be
// dropped. Incarnations differ by endpoint (each binds a new port), and a
// restarted dispatcher knows a supervisor only from its next Hello or
// Heartbeat.
func (c *cluster) waitMember(name string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	line, ok := c.sups[name].stderr.wait(regexp.MustCompile(`"msg":"supervisor starting"`), deadline)
	if !ok {
		c.t.Fatalf("%s never said it started", c.sups[name].name)
	}
	var started struct{ Endpoint string }
	if err := json.Unmarshal([]byte(line), &started); err != nil || started.Endpoint == "" {
		c.t.Fatalf("%s: no endpoint in %q (%v)", c.sups[name].name, line, err)
	}
	re := regexp.MustCompile(`"msg":"supervisor joined".*"supervisor":"` + regexp.QuoteMeta(name) +
		`","endpoint":"` + regexp.QuoteMeta(started.Endpoint) + `"`)
	if _, ok := c.disp.stderr.wait(re, deadline); !ok {
		c.t.Fatalf("%s never took %s (%s) as a member", c.disp.name, c.sups[name].name, started.Endpoint)
	}
}

func (c *cluster) killSupervisor(name string) { c.kill(c.sups[name], c.contact[name]) }

// dispatcherDone reports that the dispatcher exited by itself.
func (c *cluster) dispatcherDone() bool {
	select {
	case <-c.disp.done:
		return true
	default:
		return false
	}
}

// waitFor polls the request log until cond holds, failing the test at the
// deadline or when the dispatcher finished first.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func([]testweb.Request) bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(c.w.requests()) {
			return
		}
		if c.dispatcherDone() {
			c.t.Fatalf("the crawl ended before %s (%d requests)", what, len(c.w.requests()))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s within %s (%d requests)", what, timeout, len(c.w.requests()))
		}
		<-tick.C
	}
}

// waitRequests waits until the crawl has made at least n requests.
func (c *cluster) waitRequests(n int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%d requests", n), 30*time.Second, func(log []testweb.Request) bool { return len(log) >= n })
}

// waitRequestBy waits until the incarnation with contact has made a
// request.
func (c *cluster) waitRequestBy(what, contact string) {
	c.t.Helper()
	c.waitFor(what, 30*time.Second, func(log []testweb.Request) bool {
		return slices.ContainsFunc(log, func(r testweb.Request) bool { return by(r, contact) })
	})
}

// startTwoSupervisors starts the crash web and a cluster of a dispatcher
// and supervisors sup-1 and sup-2 (after the shared baseline crawl);
// skipped in -short mode.
func startTwoSupervisors(t *testing.T, what string) (*crashWeb, *cluster) {
	t.Helper()
	proctest.Short(t, what)
	baseline(t)
	return startTwoSupervisorsOn(t, startCrashWeb(t))
}

// startTwoSupervisorsOn is startTwoSupervisors crawling w.
func startTwoSupervisorsOn(t *testing.T, w *crashWeb) (*crashWeb, *cluster) {
	t.Helper()
	c := newCluster(t, w)
	c.startDispatcher()
	c.startSupervisor("sup-1")
	c.startSupervisor("sup-2")
	return w, c
}

// by reports whether r was made by the incarnation with contact.
func by(r testweb.Request, contact string) bool {
	return strings.Contains(r.UserAgent, "(+"+contact+")")
}

// finish waits for the dispatcher to end the crawl, stops the supervisors
// and returns the export.
func (c *cluster) finish() string {
	c.t.Helper()
	if code := c.disp.waitExit(2 * time.Minute); code != 0 {
		c.t.Fatalf("%s exit code %d", c.disp.name, code)
	}
	for name, s := range c.sups {
		select {
		case <-s.done:
			continue
		default:
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		if code := s.waitExit(30 * time.Second); code != 0 {
			c.t.Errorf("%s exit code %d after SIGTERM", name, code)
		}
	}
	exp := start(c.t, "export", "export", "--state-dir", c.stateDir, "--format", "jsonl", "--provenance")
	if code := exp.waitExit(time.Minute); code != 0 {
		c.t.Fatalf("export exit code %d", code)
	}
	return exp.stdout.String()
}

// summary reads the last dispatcher's run summary.
func (c *cluster) summary() map[string]any {
	c.t.Helper()
	b, err := os.ReadFile(c.summaryPath)
	if err != nil {
		c.t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		c.t.Fatalf("summary %s: %v", c.summaryPath, err)
	}
	return s
}

// runUninterrupted crawls w with two supervisors and nothing killed.
func runUninterrupted(t *testing.T, w *crashWeb) string {
	c := newCluster(t, w)
	c.startDispatcher()
	c.startSupervisor("sup-1")
	c.startSupervisor("sup-2")
	return c.finish()
}

// The export of an uninterrupted crawl of the same web, made once and
// compared with every crash test's.
var (
	baselineOnce sync.Once
	baselineView map[string]string
	baselineErr  string
)

func baseline(t *testing.T) map[string]string {
	t.Helper()
	baselineOnce.Do(func() {
		ok := t.Run("uninterrupted", func(t *testing.T) {
			w := startCrashWeb(t)
			out := runUninterrupted(t, w)
			baselineView = checkExport(t, out, w.truth)
			checkCrawlPoliteness(t, w.requests(), nil)
		})
		if !ok {
			baselineErr = "the uninterrupted crawl failed"
		}
	})
	if baselineErr != "" {
		t.Fatal(baselineErr)
	}
	return baselineView
}

// verify checks a crash test's outcome: the export equals the truth and
// the uninterrupted run's, and the request log shows politeness.
func (c *cluster) verify(export string) {
	c.t.Helper()
	want := baseline(c.t)
	got := checkExport(c.t, export, c.w.truth)
	for id, v := range want {
		if got[id] != v {
			c.t.Errorf("record %s differs from the uninterrupted run:\n got %s\nwant %s", id, got[id], v)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			c.t.Errorf("record %s is not in the uninterrupted run's export", id)
		}
	}
	checkCrawlPoliteness(c.t, c.w.requests(), c.events)
}

// exportValue is a found value as the export shows it, without its time.
type exportValue struct {
	Value     string `json:"value"`
	Source    string `json:"source"`
	Mapping   string `json:"mapping"`
	Depth     int    `json:"depth"`
	Conflicts []struct {
		Value  string `json:"value"`
		Source string `json:"source"`
		Depth  int    `json:"depth"`
	} `json:"conflicts"`
}

// checkExport checks a JSON Lines export with provenance: every record
// there once, no key twice in any object, no conflict repeating the value
// that won or another conflict, and the truth filled in. It returns each
// record's canonical form (found values without their times) by id.
func checkExport(t *testing.T, export string, truth map[string]map[string]string) map[string]string {
	t.Helper()
	view := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(export), "\n") {
		if dup := duplicateKeys(line); len(dup) > 0 {
			t.Errorf("export line %d has keys more than once: %v\n%s", i+1, dup, line)
		}
		var rec struct {
			ID         string                 `json:"id"`
			Fields     map[string]any         `json:"fields"`
			Provenance map[string]exportValue `json:"provenance"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("export line %d %q: %v", i+1, line, err)
		}
		if _, ok := view[rec.ID]; ok {
			t.Errorf("record %s exported twice", rec.ID)
		}
		for f, v := range rec.Provenance {
			seen := map[string]bool{v.Value + "\x00" + v.Source: true}
			for _, cf := range v.Conflicts {
				key := cf.Value + "\x00" + cf.Source
				if cf.Value == v.Value || seen[key] {
					t.Errorf("record %s field %s: conflict %q from %s duplicates a value already there", rec.ID, f, cf.Value, cf.Source)
				}
				seen[key] = true
			}
			sort.Slice(v.Conflicts, func(i, j int) bool {
				a, b := v.Conflicts[i], v.Conflicts[j]
				return a.Value+a.Source < b.Value+b.Source
			})
			rec.Provenance[f] = v
			if fv, _ := rec.Fields[f].(string); fv != v.Value {
				t.Errorf("record %s field %s is %q but its provenance says %q", rec.ID, f, fv, v.Value)
			}
		}
		canon, err := json.Marshal(struct {
			Fields     map[string]any         `json:"fields"`
			Provenance map[string]exportValue `json:"provenance"`
		}{rec.Fields, rec.Provenance})
		if err != nil {
			t.Fatal(err)
		}
		view[rec.ID] = string(canon)
		for f, want := range truth[rec.ID] {
			if got := rec.Provenance[f].Value; got != want {
				t.Errorf("record %s field %s = %q, want %q", rec.ID, f, got, want)
			}
		}
	}
	for id := range truth {
		if _, ok := view[id]; !ok {
			t.Errorf("record %s lost: not in the export", id)
		}
	}
	return view
}

// duplicateKeys lists the keys that occur twice in one JSON object of
// line, at any depth (encoding/json would silently keep the last).
func duplicateKeys(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	var dup []string
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := fmt.Sprint(k)
				if seen[key] {
					dup = append(dup, path+"."+key)
				}
				seen[key] = true
				if err := walk(path + "." + key); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(path + "[" + strconv.Itoa(i) + "]"); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(""); err != nil {
		return []string{"(unreadable: " + err.Error() + ")"}
	}
	return dup
}

// checkCrawlPoliteness checks the request log of a crawl that may have
// lost processes: per host, consecutive request arrivals (whoever made
// them: a host that changed owner included) are at least the Crawl-delay
// apart, and a page is requested again only when a kill explains it: the
// incarnation that requested it first was killed before the repeat, or
// the dispatcher was killed, which forgets the leases of the moment (the
// pages then out, and the results of its last uncommitted moments, are
// sent again).
func checkCrawlPoliteness(t *testing.T, log []testweb.Request, events []crashEvent) {
	t.Helper()
	if len(log) == 0 {
		t.Fatal("the fixture web received no request")
	}
	const commitSlack = 2 * time.Second // a dispatcher commits every 250ms
	first := map[string]testweb.Request{}
	last := map[string]testweb.Request{}
	repeats := 0
	for _, r := range log {
		key := r.Host + r.Path
		if prev, ok := first[key]; ok {
			explained := false
			for _, e := range events {
				if !r.Time.After(e.at) {
					continue
				}
				if e.who == "dispatcher" && prev.Time.After(e.at.Add(-commitSlack)) ||
					e.who != "dispatcher" && by(prev, e.who) {
					explained = true
				}
			}
			if !explained {
				t.Errorf("%s requested again at %s (first at %s by %q) and no kill explains it",
					key, r.Time.Format("15:04:05.000"), prev.Time.Format("15:04:05.000"), prev.UserAgent)
			}
			repeats++
		} else {
			first[key] = r
		}
		if !strings.Contains(r.UserAgent, "backfill/") || !strings.Contains(r.UserAgent, "+https://") {
			t.Errorf("request %s has User-Agent %q, want an identifying one with a contact URL", key, r.UserAgent)
		}
		if prev, ok := last[r.Host]; ok {
			if gap := r.Time.Sub(prev.Time); gap < crashDelay {
				t.Errorf("%s: %s between requests (%s by %q at %s, then %s by %q at %s); Crawl-delay is %s",
					r.Host, gap, prev.Path, prev.UserAgent, prev.Time.Format("15:04:05.000"),
					r.Path, r.UserAgent, r.Time.Format("15:04:05.000"), crashDelay)
			}
		}
		last[r.Host] = r
	}
	t.Logf("%d requests to %d hosts, %d pages requested again after a kill", len(log), len(last), repeats)
}

// TestCrashSupervisor kills a supervisor mid-crawl: the dispatcher drops
// it after its missed heartbeats and its hosts go to the survivor; when it
// comes back under the same name it gets work again, and the crawl ends
// as an uninterrupted one does.
func TestCrashSupervisor(t *testing.T) {
	w, c := startTwoSupervisors(t, "end-to-end crash test")
	victim, survivor := c.contact["sup-1"], c.contact["sup-2"]
	c.waitFor("requests from both supervisors", 30*time.Second, func(log []testweb.Request) bool {
		n1, n2 := 0, 0
		for _, r := range log {
			if by(r, victim) {
				n1++
			}
			if by(r, survivor) {
				n2++
			}
		}
		return n1 >= 10 && n2 >= 10
	})
	c.killSupervisor("sup-1")
	killedAt := c.events[0].at
	if n := len(w.requests()); n > crashRequests*3/4 {
		t.Fatalf("%d of about %d requests made before the kill: not mid-crawl", n, crashRequests)
	}
	victimHosts := map[string]bool{}
	for _, r := range w.requests() {
		if by(r, victim) {
			victimHosts[r.Host] = true
		}
	}

	// Dropped for silence, its leased tasks re-queued...
	line, ok := c.disp.stderr.wait(regexp.MustCompile(`"msg":"supervisor left".*"supervisor":"sup-1".*"reason":"silent"`), time.Now().Add(30*time.Second))
	if !ok {
		t.Fatalf("the dispatcher did not drop the killed supervisor")
	}
	var left struct{ Requeued int }
	if err := json.Unmarshal([]byte(line), &left); err != nil || left.Requeued == 0 {
		t.Errorf("drop of the killed supervisor re-queued %d tasks (%v), want some: %s", left.Requeued, err, line)
	}
	// ...and sent to the survivor.
	c.waitFor("request by the survivor to a host of the killed supervisor", 30*time.Second, func(log []testweb.Request) bool {
		for _, r := range log {
			if r.Time.After(killedAt) && by(r, survivor) && victimHosts[r.Host] {
				return true
			}
		}
		return false
	})

	// It comes back under the same name and gets work again.
	c.startSupervisor("sup-1")
	comeback := c.contact["sup-1"]
	c.waitRequestBy("request by the restarted supervisor", comeback)
	c.verify(c.finish())
}

// TestCrashDispatcher kills the dispatcher mid-crawl and starts it again
// on the same state directory: it resumes and finishes the crawl.
func TestCrashDispatcher(t *testing.T) {
	w, c := startTwoSupervisors(t, "end-to-end crash test")
	c.waitRequests(crashRequests / 4)
	c.killDispatcher()
	if n := len(w.requests()); n > crashRequests*3/4 {
		t.Fatalf("%d of about %d requests made before the kill: not mid-crawl", n, crashRequests)
	}
	c.startDispatcher()
	line, ok := c.disp.stderr.wait(regexp.MustCompile(`"msg":"dispatcher running"`), time.Now().Add(30*time.Second))
	if !ok {
		t.Fatal("the restarted dispatcher did not start running")
	}
	var running struct{ Complete, Queued int }
	if err := json.Unmarshal([]byte(line), &running); err != nil {
		t.Fatal(err)
	}
	if running.Queued == 0 || running.Queued >= crashRequests {
		t.Errorf("restarted dispatcher resumed with %d tasks queued, want some but not the whole crawl: %s", running.Queued, line)
	}
	c.verify(c.finish())
}

// TestCrashDispatcherKeepsSentAnswers kills the dispatcher after the
// supervisors sent it results and before it committed them: it is
// stopped first, the supervisors finish the requests they have in flight
// and fetch the tasks they hold, and send their results (which wait
// unread), and then it is killed and started again. The restarted
// dispatcher leases those tasks again, under new leases; the supervisors
// answer them with the answers they already sent, so no page is
// requested twice.
//
// Every response takes sentLatency: a host's next task is leased only
// shortly before its time (the dispatcher's readyLead), so what a
// supervisor is sure to hold at any moment is its requests in flight,
// about a host in two here.
func TestCrashDispatcherKeepsSentAnswers(t *testing.T) {
	const sentLatency = 400 * time.Millisecond
	proctest.Short(t, "end-to-end crash test")
	baseline(t)
	w, c := startTwoSupervisorsOn(t, startCrashWebWith(t,
		testweb.LargeOptions{Hosts: crashHosts, Pages: crashPages, CrawlDelay: crashDelay, Latency: sentLatency}))
	c.waitRequests(crashRequests / 4)
	frozenAt := time.Now()
	c.freezeDispatcher()
	c.waitFor("pages answered while the dispatcher is stopped", 30*time.Second, func(log []testweb.Request) bool {
		n := 0
		for _, r := range pagesOf(log) {
			if r.Done.After(frozenAt) {
				n++
			}
		}
		return n >= 2
	})
	c.killDispatcher()
	// It stopped taking results when it was frozen: that is when the
	// kill happened, as far as the crawl can tell.
	c.events[len(c.events)-1].at = frozenAt
	c.startDispatcher()
	c.verify(c.finish())
	byKey := map[string][]string{}
	for _, r := range pagesOf(w.requests()) {
		key := r.Host + r.Path
		byKey[key] = append(byKey[key], r.Time.Format("15:04:05.000")+" by "+r.UserAgent)
	}
	t.Logf("dispatcher stopped at %s", frozenAt.Format("15:04:05.000"))
	for key, reqs := range byKey {
		if len(reqs) > 1 {
			t.Errorf("%s requested %d times: %s", key, len(reqs), strings.Join(reqs, "; "))
		}
	}
}

// pagesOf is the page requests of log: not robots.txt, nor a soft-404
// probe.
func pagesOf(log []testweb.Request) []testweb.Request {
	var pages []testweb.Request
	for _, r := range log {
		if r.Path != "/robots.txt" && !strings.Contains(r.Path, "backfill-probe") {
			pages = append(pages, r)
		}
	}
	return pages
}

// TestCrashRandom kills and restarts the dispatcher and the supervisors at
// random moments of one crawl. The seed is logged; BACKFILL_CRASH_SEED
// replays a run.
func TestCrashRandom(t *testing.T) {
	rng := crashRNG(t, "")
	w, c := startTwoSupervisors(t, "end-to-end crash test")
	// Each kind of crash once, in a random order, at random moments, to
	// random supervisors: the dispatcher killed and restarted at once; a
	// supervisor killed and restarted at once (the dispatcher sees a new
	// incarnation and gives it its hosts back right away, so what it
	// asked of them just before the kill must be in the host cache); a
	// supervisor killed, dropped after its missed heartbeats, restarted.
	kinds := []string{"dispatcher", "restart", "drop"}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i, kind := range kinds {
		c.waitRequests(len(w.requests()) + crashRequests/16 + rng.IntN(crashRequests/10))
		if kind == "dispatcher" {
			c.killDispatcher()
			c.startDispatcher()
			t.Logf("event %d: dispatcher killed and restarted", i)
			continue
		}
		name := fmt.Sprintf("sup-%d", 1+rng.IntN(2))
		if kind == "drop" {
			// After a dispatcher restart a supervisor may not have
			// spoken to the new dispatcher yet; killed then, it was
			// never a member and nothing would drop it.
			c.waitMember(name)
		}
		c.killSupervisor(name)
		if kind == "drop" {
			re := regexp.MustCompile(`"msg":"supervisor left".*"supervisor":"` + name + `".*"reason":"silent"`)
			if _, ok := c.disp.stderr.wait(re, time.Now().Add(30*time.Second)); !ok {
				t.Fatalf("event %d: %s was not dropped", i, name)
			}
		}
		c.startSupervisor(name)
		t.Logf("event %d: %s killed, %s", i, name, map[string]string{"restart": "restarted at once", "drop": "dropped, restarted"}[kind])
	}
	c.verify(c.finish())
}

// TestRebalanceMidCrawl adds a third supervisor mid-crawl: the domains of
// its virtual nodes change owner while their hosts are being crawled. The
// request log shows no delay violation (a host's new owner waits for the
// old owner's last request) and no page fetched twice (the lease is far
// longer than the test, so none expired).
func TestRebalanceMidCrawl(t *testing.T) {
	w, c := startTwoSupervisors(t, "end-to-end crawl")
	c.waitRequests(crashRequests / 4)
	joinedAt := time.Now()
	c.startSupervisor("sup-3")
	newcomer := c.contact["sup-3"]
	c.waitRequestBy("request by the new supervisor", newcomer)
	c.verify(c.finish())
	if exp, _ := c.summary()["expired"].(float64); exp != 0 {
		t.Errorf("%v leases expired; the test wants none", exp)
	}
	// Some host was crawled by an old owner before the join and by the
	// newcomer after it: the rebalance moved work in progress.
	moved := map[string]bool{}
	before := map[string]bool{}
	for _, r := range w.requests() {
		if r.Time.Before(joinedAt) {
			before[r.Host] = true
		} else if by(r, newcomer) && before[r.Host] {
			moved[r.Host] = true
		}
	}
	if len(moved) == 0 {
		t.Errorf("no host changed owner mid-crawl")
	}
	t.Logf("hosts moved to the new supervisor mid-crawl: %d", len(moved))
}

// crashRNG is a random source for a test of kills at random moments,
// seeded from BACKFILL_CRASH_SEED when set (to replay a run) or the
// clock; the seed is logged, with what, so that a failure can be
// replayed.
func crashRNG(t *testing.T, what string) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BACKFILL_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BACKFILL_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d%s (BACKFILL_CRASH_SEED=%d replays it)", seed, what, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
