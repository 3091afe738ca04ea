package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// TestChaos kills the dispatcher and the supervisors, at random, many
// times in one crawl (BACKFILL_CHAOS_KILLS of them; the test is skipped
// without it), and checks that the crawl still ends as it should: every
// record filled with the truth, every request polite, every page
// requested again explained by a kill. It reports how many pages were
// fetched more than once, and after what: the number to keep low.
// BACKFILL_CRASH_SEED replays a run.
//
//	BACKFILL_CHAOS_KILLS=23 BACKFILL_CRASH_SEED=1 go test -count=1 -run 'TestChaos$' -v -timeout 25m ./cmd/backfill
func TestChaos(t *testing.T) {
	kills, _ := strconv.Atoi(proctest.OptIn(t, "BACKFILL_CHAOS_KILLS", "the chaos test (the number of kills, e.g. 23)"))
	if kills <= 0 {
		t.Fatal("BACKFILL_CHAOS_KILLS: want a number of kills")
	}
	rng := crashRNG(t, fmt.Sprintf(", %d kills", kills))

	// A web large enough for the kills: about kills×3 requests per host.
	hosts, pages := 2*crashHosts, max(crashPages, 3*kills)
	w := startCrashWebOf(t, hosts, pages)
	requests := hosts * (pages + 3)
	c := newCluster(t, w)
	c.startDispatcher()
	c.startSupervisor("sup-1")
	c.startSupervisor("sup-2")
	// Kill i comes at about request (i+1)×step, so that the kills end
	// within the first two thirds of the crawl, however many requests the
	// kills themselves cost (a drop waits for missed heartbeats while the
	// other supervisor goes on).
	step := requests * 2 / 3 / (kills + 1)
	kinds := map[string]int{}
	for i := range kills {
		c.waitRequests(max(len(w.requests())+1, (i+1)*step-step/4+rng.IntN(step/2+1)))
		kind := []string{"dispatcher", "restart", "drop"}[rng.IntN(3)]
		kinds[kind]++
		if kind == "dispatcher" {
			c.killDispatcher()
			c.startDispatcher()
			continue
		}
		name := fmt.Sprintf("sup-%d", 1+rng.IntN(2))
		if kind == "drop" {
			c.waitMember(name)
		}
		// The same dispatcher may have dropped the name before.
		left := regexp.MustCompile(`"msg":"supervisor left".*"supervisor":"` + name + `".*"reason":"silent"`)
		dropped := len(left.FindAllString(c.disp.stderr.String(), -1))
		c.killSupervisor(name)
		if kind == "drop" {
			if _, ok := c.disp.stderr.WaitN(left, dropped+1, time.Now().Add(30*time.Second)); !ok {
				t.Fatalf("kill %d: %s was not dropped", i, name)
			}
		}
		c.startSupervisor(name)
	}
	checkExport(t, c.finish(), w.truth)
	log := w.requests()
	checkCrawlPoliteness(t, log, c.events)
	twice, after := repeatedPages(log, c.events)
	t.Logf("chaos: %d kills (%v), %d requests, %d pages fetched twice or more (%v)", kills, kinds, len(log), twice, after)
	logPoliteness(t, "chaos", log, c.events)
}

// killsBetween names the kills between from and to, in order.
func killsBetween(events []crashEvent, from, to time.Time) string {
	var ks []string
	for _, e := range events {
		if e.at.After(from) && e.at.Before(to) {
			ks = append(ks, fmt.Sprintf("%s at %s", e.who, e.at.Format("15:04:05.000")))
		}
	}
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, ", ")
}

// logPoliteness logs what the web's log says of politeness: the URLs
// requested again (robots.txt apart: a restarted supervisor reads it
// again) and the intervals from the end of a host's response to its next
// request under crashDelay, each with who made the two requests and the
// last kill before it.
func logPoliteness(t *testing.T, what string, log []testweb.Request, events []crashEvent) {
	t.Helper()
	p := testweb.CheckPoliteness(log, func(string) time.Duration { return crashDelay })
	robots := 0
	for _, r := range p.Repeats {
		if r.Again.Path == "/robots.txt" {
			robots++
		}
	}
	t.Logf("%s: %s", what, p)
	t.Logf("%s: %d page requests and %d robots.txt requests for a URL already requested; %d of %d intervals under the %s delay, shortest %s",
		what, len(p.Repeats)-robots, robots, len(p.Under), p.Intervals, crashDelay, p.Shortest.Gap)
	lastKill := func(at time.Time) string {
		k := "none"
		for _, e := range events {
			if e.at.Before(at) {
				k = fmt.Sprintf("%s at %s", e.who, e.at.Format("15:04:05.000"))
			}
		}
		return k
	}
	for _, r := range p.Repeats {
		t.Logf("%s: again: %s%s by %q at %s, first by %q at %s; kills between: %s", what,
			r.Again.Host, r.Again.Path, r.Again.UserAgent, r.Again.Time.Format("15:04:05.000"),
			r.First.UserAgent, r.First.Time.Format("15:04:05.000"), killsBetween(events, r.First.Time, r.Again.Time))
	}
	for _, iv := range p.Under {
		t.Logf("%s: under the delay: %s%s by %q at %s, %s after the end of %s by %q; last kill before: %s", what,
			iv.Next.Host, iv.Next.Path, iv.Next.UserAgent, iv.Next.Time.Format("15:04:05.000"), iv.Gap, iv.Prev.Path, iv.Prev.UserAgent,
			lastKill(iv.Next.Time))
	}
}

// repeatedPages counts the page requests that repeat an earlier one, and
// sorts them by what came last before the repeat: a dispatcher kill, the
// kill of the incarnation that made the first request ("holder killed"),
// or neither ("moved": its host went to the other supervisor after some
// other kill); and by who repeated it, when not the same supervisor.
func repeatedPages(log []testweb.Request, events []crashEvent) (int, map[string]int) {
	first := map[string]testweb.Request{}
	after := map[string]int{}
	n := 0
	for _, r := range pagesOf(log) {
		key := r.Host + r.Path
		prev, ok := first[key]
		if !ok {
			first[key] = r
			continue
		}
		n++
		why := "moved"
		for _, e := range events {
			if e.at.Before(prev.Time) || e.at.After(r.Time) {
				continue
			}
			switch {
			case e.who == "dispatcher":
				why = "dispatcher killed"
			case by(prev, e.who):
				why = "holder killed"
			}
		}
		if supervisorOf(prev) != supervisorOf(r) {
			why += ", other supervisor"
		}
		after[why]++
	}
	return n, after
}

// supervisorOf is the name of the supervisor that made r (its contact
// URL ends in /crash/NAME/INCARNATION).
func supervisorOf(r testweb.Request) string {
	_, after, _ := strings.Cut(r.UserAgent, "/crash/")
	name, _, _ := strings.Cut(after, "/")
	return name
}
