//go:build unix

package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"backfill/testweb"
)

// sameDelay is a delay for CheckPoliteness that is d on every host.
func sameDelay(d time.Duration) func(string) time.Duration {
	return func(string) time.Duration { return d }
}

// politeCounts is what a benchmark prints and compares of a
// testweb.Politeness: requests for a URL already requested (pages, and
// robots.txt apart, since a host's robots.txt read again by another
// process is a request of another kind), and intervals under the host's
// delay with the shortest interval of all.
type politeCounts struct {
	requests, intervals     int
	pagesAgain, robotsAgain int
	under                   int
	shortest                time.Duration
	p                       testweb.Politeness
	start                   time.Time // times are printed from here: the run's start
}

// countPoliteness counts p, a run started at start.
func countPoliteness(p testweb.Politeness, start time.Time) politeCounts {
	c := politeCounts{requests: p.Requests, intervals: p.Intervals, under: len(p.Under), shortest: p.Shortest.Gap, p: p, start: start}
	for _, r := range p.Repeats {
		if r.Again.Path == "/robots.txt" {
			c.robotsAgain++
		} else {
			c.pagesAgain++
		}
	}
	return c
}

// report prints c on one line after prefix and name, with the first few
// repeats and intervals under the delay spelled out (who asked, when, how
// far apart), and reports the counts as metrics.
func (c politeCounts) report(b *testing.B, prefix, name string) {
	b.ReportMetric(float64(c.pagesAgain), "pages-again")
	b.ReportMetric(float64(c.robotsAgain), "robots-again")
	b.ReportMetric(float64(c.under), "under-delay")
	b.ReportMetric(c.shortest.Seconds(), "shortest-s")
	fmt.Printf("%s: %-6s %s\n", prefix, name, c.p)
	fmt.Printf("%s: %-6s pages requested again %d, robots.txt again %d, intervals under the delay %d of %d, shortest %s\n",
		prefix, name, c.pagesAgain, c.robotsAgain, c.under, c.intervals, c.shortest.Round(time.Millisecond))
	const shown = 8
	for i, r := range c.p.Repeats {
		if i == shown {
			fmt.Printf("%s: %-6s   … %d more requested again\n", prefix, name, len(c.p.Repeats)-shown)
			break
		}
		fmt.Printf("%s: %-6s   again: %s%s at +%s by %s, first at +%s by %s (arrival to arrival %s)\n", prefix, name,
			r.Again.Host, r.Again.Path, since(c.start, r.Again.Time), who(r.Again), since(c.start, r.First.Time), who(r.First),
			r.Again.Time.Sub(r.First.Time).Round(time.Millisecond))
	}
	for i, iv := range c.p.Under {
		if i == shown {
			fmt.Printf("%s: %-6s   … %d more under the delay\n", prefix, name, len(c.p.Under)-shown)
			break
		}
		gap := iv.Gap.Round(time.Millisecond).String()
		if iv.Open {
			gap = "while the previous response was never ended"
		}
		fmt.Printf("%s: %-6s   under: %s %s at +%s by %s, %s after the end of %s by %s\n", prefix, name,
			iv.Next.Host, iv.Next.Path, since(c.start, iv.Next.Time), who(iv.Next), gap, iv.Prev.Path, who(iv.Prev))
	}
}

// since is t from a run's start.
func since(start, t time.Time) time.Duration {
	return t.Sub(start).Round(time.Millisecond)
}

// who names the process that made r: the benchmark's contact URL path
// after backfill.invalid/ in its User-Agent, or "?".
func who(r testweb.Request) string {
	const mark = "backfill.invalid/"
	i := strings.Index(r.UserAgent, mark)
	if i < 0 {
		return "?"
	}
	s := r.UserAgent[i+len(mark):]
	if j := strings.IndexAny(s, ") "); j >= 0 {
		s = s[:j]
	}
	return s
}

// comparePoliteness prints one line per build of what each made of the
// same web, side by side.
func comparePoliteness(prefix string, builds []build, got map[string]politeCounts) {
	for _, bd := range builds {
		c, ok := got[bd.name]
		if !ok {
			continue
		}
		fmt.Printf("%s: %-6s %6d requests, pages requested again %4d, robots.txt again %3d, intervals under the delay %4d of %6d, shortest %s\n",
			prefix, bd.name, c.requests, c.pagesAgain, c.robotsAgain, c.under, c.intervals, c.shortest.Round(time.Millisecond))
	}
}
