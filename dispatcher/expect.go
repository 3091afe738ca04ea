package dispatcher

import (
	"time"

	"backfill/seconds"
)

// When dispatching begins. Domains go to supervisors by a consistent-hash
// ring of the members: dispatching before the crawl's supervisors have all
// joined hands every domain to the first ones, and the domains move (with
// their politeness hand-over) as the others join. So Run waits.

const (
	// settleQuiet: see joinedFresh.
	settleQuiet = 100 * time.Millisecond
	// answersQuiet is how long a dispatcher whose supervisors were
	// running before it (they joined by Heartbeat: it restarted) waits
	// after the last one joined before dispatching: each sends again, on
	// its Welcome, the answers it sent lately, which the dispatcher before
	// may have died without committing; taken first (adopted), their
	// pages are not fetched again.
	answersQuiet = 250 * time.Millisecond
	// expectLogEvery is how often a dispatcher waiting for Config.Expect
	// supervisors says so when nothing changes.
	expectLogEvery = 10 * time.Second
)

// settle reports whether dispatching may begin, at now, for a Run begun at
// start. With Config.Expect, once that many supervisors have joined, or
// when Config.ExpectTimeout has passed (said at Warn), and answersQuiet
// after the last join when they joined by Heartbeat; meanwhile it logs
// how many have joined, when that changes and every expectLogEvery.
// Without, once the supervisors starting with the crawl have joined
// (joinedFresh), or after one heartbeat interval: supervisors that were
// running before this Run (the dispatcher restarted) all speak within it.
// Callers hold mu.
func (d *Dispatcher) settle(start, now time.Time) bool {
	if d.cfg.Expect <= 0 {
		return !now.Before(start.Add(d.cfg.Heartbeat)) || d.joinedFresh(now)
	}
	// A member quarantined will not join again: it is one fewer to wait
	// for.
	n := d.members.Len() + d.members.Quarantine().Len()
	if n >= d.cfg.Expect && d.joinedByBeat && now.Sub(d.lastJoin) < answersQuiet {
		return false
	}
	if n >= d.cfg.Expect {
		if !d.waitLogged.IsZero() {
			d.log.Info("every expected supervisor joined; dispatching", "supervisors", n, "expected", d.cfg.Expect,
				seconds.Attr("waited", now.Sub(start).Round(time.Millisecond)))
		}
		return true
	}
	timeout := d.cfg.ExpectTimeout
	if timeout == 0 {
		timeout = DefaultExpectTimeout
	}
	if timeout > 0 && now.Sub(start) >= timeout {
		d.log.Warn("not every expected supervisor joined in time; dispatching to those that did",
			"supervisors", n, "expected", d.cfg.Expect, seconds.Attr("waited", timeout))
		return true
	}
	if d.waitLogged.IsZero() || n != d.waitMembers || now.Sub(d.waitLogged) >= expectLogEvery {
		d.waitLogged, d.waitMembers = now, n
		// timeout_seconds 0: no limit.
		d.log.Info("waiting for supervisors before dispatching", "supervisors", n, "expected", d.cfg.Expect,
			seconds.Attr("waited", now.Sub(start).Round(time.Millisecond)), seconds.Attr("timeout", max(timeout, 0)))
	}
	return false
}

// joinedFresh reports that the supervisors of this crawl have all
// announced themselves: every member joined by a Hello (supervisors
// starting with the crawl say Hello at once), and none has joined for
// settleQuiet. Supervisors that were running before this Run (the
// dispatcher restarted) join by Heartbeat, spread over one heartbeat
// interval; once one of those is heard, Run waits out the whole interval
// so that domains do not go to the first one heard and then move. Without
// this, a crawl whose supervisors start with it idled for a heartbeat
// interval. Callers hold mu.
func (d *Dispatcher) joinedFresh(now time.Time) bool {
	return d.members.Len() > 0 && !d.joinedByBeat && now.Sub(d.lastJoin) >= settleQuiet
}
