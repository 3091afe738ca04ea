package resolver

import (
	"math"
	"time"
)

// A query can be lost two ways: the server (or a link on the way) has
// more than it can take and drops the excess, or the path loses packets at
// random whatever the rate. Slowing down cures the first and does nothing
// for the second: a limiter that took every loss for congestion slowed to
// a few queries a second on a path losing a quarter of them, and the
// crawl took forty times as long.
//
// What tells them apart is what the answers show when the pace drops. So
// every cut is a test (a probe): the first probeSamples queries sent after
// it, at the lower pace, are followed until each is answered or lost (a
// lost one ends a retransmission time-out after an answered one would, so
// counting the first to end would count answers), and then compared with
// the queries sent in the second before the cut. Were the loss
// congestion, the server would answer as many a second as before, and the
// probe would lose only what its lower pace leaves above that; were it
// the path's, the probe would lose as large a share as before. The nearer
// of the two decides: congestion keeps the cut; the path's loss undoes it,
// and the share lost before the cut and in the probe becomes the path's
// floor. From then on a time-out is congestion only when the last second
// lost clearly more than the floor (by lossMargin and two standard
// deviations of the difference of the two shares); a lost query is asked
// again after one retransmission time-out, shorter (lossyMinRTO) and not
// doubled (limit.go), up to as many times as makes losing every one of
// them unlikely (attempts); and the window counts only the share of the
// queries in flight that reached the server (limit.go). Once a second the
// floor is refined from what the path lost (refine), down as well as up:
// a path that healed is not lossy for good.
//
// Until a probe has found a floor, every time-out is congestion, as it
// always was: a busy server is paced exactly as before. A server that
// answers hardly anything at the cut pace (more than maxFloor lost) keeps
// its cut: it is down or swamped, not on a lossy path.

// lossState is a limiter's view of its path's random loss.
type lossState struct {
	floor  float64 // share of queries the path loses at a pace the server keeps up with
	floorN int     // queries that share was measured on

	probing            bool
	preWindow, preRate float64   // the window and pace before the cut
	probeSent          int       // queries sent since the cut, up to probeSamples
	probeLast          time.Time // when the last of them was sent
	probeN, probeLost  int       // of them, ended and lost
	undone             int64     // cuts undone: the loss was the path's
	refined            time.Time // when the floor was last refined
}

const (
	// probeSamples is how many queries sent at a cut pace decide whether
	// the cut helped: enough that a share of a half or a quarter is not
	// taken for a share near zero by chance.
	probeSamples = 48
	// minFloor is the smallest loss taken for the path's: below it a
	// probe's share is noise, or congestion's tail. maxFloor is the
	// largest: a server that answers less than that at any pace is down
	// or swamped, and is not to be asked faster.
	minFloor = 0.05
	maxFloor = 0.8
	// lossMargin is how much more than the floor a second must lose,
	// beyond chance, to be congestion.
	lossMargin = 0.05
	// minLossSamples is the fewest ended queries a second's share is
	// judged on against a floor; fewer cannot show congestion.
	minLossSamples = 16
	// lossGiveUp is how unlikely losing every query of a question at
	// the floor's loss should be before the question fails: a crawl asks
	// thousands, and each that fails by bad luck is a host lost.
	lossGiveUp = 1e-5
	// maxAttempts bounds the queries of a question on a lossy path: a
	// name whose every query is lost is failing, not unlucky.
	maxAttempts = 20
	// floorWeight is the most queries the floor's measure counts for
	// when it is refined: enough to hold it still against one second's
	// chance, few enough that it follows a path whose loss changes.
	floorWeight = 512
	// lossyMinRTO is the shortest wait for an answer on a lossy path
	// whose server goes on answering, in place of minRTO: there every
	// loss costs a whole wait, and a question a few of them, while a
	// wait cut too short costs one query asked twice. Still many round
	// trips of a server close by; a server whose answers vary more
	// (a recursive one, answering from its cache or not) has a longer
	// one from its round trips.
	lossyMinRTO = 100 * time.Millisecond
	// probeLimit ends a probe whose queries did not all end (one given
	// up by its caller before it was sent): the cut stays.
	probeLimit = 10 * time.Second
)

// sendTenth counts the queries sent in one tenth of a second that have
// ended, and those of them lost.
type sendTenth struct {
	ended, lost int
	epoch       int64 // which tenth of a second they were sent in (Unix time / 100 ms)
}

// tallySend notes the end of a query sent at sent. Callers hold mu.
func (l *limiter) tallySend(sent time.Time, lost bool) {
	e := epoch(sent)
	t := &l.sends[e%int64(len(l.sends))]
	switch {
	case t.epoch > e:
		return // sent longer ago than the counts go back
	case t.epoch < e:
		*t = sendTenth{epoch: e}
	}
	t.ended++
	if lost {
		t.lost++
	}
}

// lostShare is the share lost of the queries sent during a second that
// ended a retransmission time-out ago, and how many they were: queries
// sent since may still be lost (a loss shows only when its wait ends, an
// answer at once), and counting them would count their answers alone.
// Callers hold mu.
func (l *limiter) lostShare(now time.Time) (share float64, n int) {
	rto, _ := l.rto(now)
	last := epoch(now.Add(-rto)) - 1
	share, n, _ = l.sentShare(last-9, last)
	return share, n
}

// sentShare is the share lost of the queries sent in the tenths of a
// second first to last (epochs, both included) that have ended, how many
// they were, and how many were sent a second in the tenths that sent any.
// Callers hold mu.
func (l *limiter) sentShare(first, last int64) (share float64, n int, rate float64) {
	lost, active := 0, 0
	for _, t := range l.sends {
		if t.epoch >= first && t.epoch <= last && t.ended > 0 {
			n += t.ended
			lost += t.lost
			active++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(lost) / float64(n), n, float64(n) / (float64(active) / 10)
}

// epoch is the tenth of a second t falls in (Unix time / 100 ms).
func epoch(t time.Time) int64 { return t.UnixNano() / int64(100*time.Millisecond) }

// congested reports whether a time-out at now is congestion. Callers
// hold mu.
func (l *limiter) congested(now time.Time) bool {
	if l.loss.floor == 0 {
		return true
	}
	share, n := l.lostShare(now)
	if n < minLossSamples {
		return false
	}
	return share > l.loss.floor+lossMargin+2*diffDev(l.loss.floor, n, l.loss.floorN)
}

// diffDev is the standard deviation of the difference of two shares lost,
// of n and m queries each lost with probability p.
func diffDev(p float64, n, m int) float64 {
	return math.Sqrt(p * (1 - p) * (1/float64(n) + 1/float64(max(m, 1))))
}

// startProbe notes, before a cut, what the cut is to be judged against.
// Callers hold mu.
func (l *limiter) startProbe() {
	l.loss = lossState{floor: l.loss.floor, floorN: l.loss.floorN, undone: l.loss.undone, refined: l.loss.refined,
		probing: true, preWindow: l.window, preRate: l.rate}
}

// probeSend counts a query sent at now into the probe, if one is under
// way and wants more. Callers hold mu.
func (l *limiter) probeSend(now time.Time) {
	if l.loss.probing && l.loss.probeSent < probeSamples {
		l.loss.probeSent++
		l.loss.probeLast = now
	}
}

// probeEnd counts the end of a query sent at sent into the probe if it is
// one of its queries, and judges the cut once all of them have ended:
// it keeps the cut (congestion) or undoes it (the path's loss). Callers
// hold mu.
func (l *limiter) probeEnd(now, sent time.Time, lost bool) {
	if !l.loss.probing {
		return
	}
	if now.Sub(l.cut) > probeLimit {
		l.loss.probing = false
		return
	}
	if !sent.After(l.cut) || (l.loss.probeSent == probeSamples && sent.After(l.loss.probeLast)) {
		return
	}
	l.loss.probeN++
	if lost {
		l.loss.probeLost++
	}
	if l.loss.probeN < probeSamples {
		return
	}
	l.loss.probing = false
	post := float64(l.loss.probeLost) / float64(l.loss.probeN)
	// The queries sent in the second before the cut have all ended by
	// now (they were sent before the probe's): their share lost, and
	// the pace they were sent at, are the cut's "before".
	cut := epoch(l.cut)
	pre, preN, preSent := l.sentShare(cut-10, cut-1)
	postSent := float64(l.loss.probeN) / max(l.loss.probeLast.Sub(l.cut).Seconds(), 0.1)
	switch {
	case post < minFloor:
		l.loss.floor, l.loss.floorN = 0, 0 // the cut pace loses nothing to speak of
		return
	case post > maxFloor || preN < minLossSamples || pre < minFloor:
		// Hardly anything answered, or nothing to compare with, or
		// hardly anything lost before: keep the cut.
		return
	}
	// Were it congestion, the server would have answered as many a
	// second as before, so the probe would lose what that leaves of
	// its pace; were it the path's, as large a share as before.
	congestion := max(l.loss.floor, 1-preSent*(1-pre)/postSent)
	if post <= (pre+congestion)/2 {
		return // congestion: the cut stands
	}
	// Slowing down did not lower the loss: it is the path's, as
	// measured before the cut and in the probe.
	l.window = max(l.window, l.loss.preWindow)
	l.rate = l.loss.preRate
	l.cuts-- // and the window grows as if it had never been cut
	l.loss.undone++
	n := preN + l.loss.probeN
	l.loss.floor = (pre*float64(preN) + float64(l.loss.probeLost)) / float64(n)
	l.loss.floorN = n
}

// refine brings the floor to what the last second lost, at most once a
// second, when the path has a floor and no probe is under way: a second
// that lost clearly less lowers it to that (a path that healed is not
// lossy for good), one within the floor's margin moves it toward that, the
// two measures weighed by their queries (the floor's counting for at most
// floorWeight), so a floor first taken from a probe's few queries does
// not stay off by their chance. A second that lost clearly more is
// congestion, which cuts. Callers hold mu.
func (l *limiter) refine(now time.Time) {
	if l.loss.floor == 0 || l.loss.probing || now.Sub(l.loss.refined) < time.Second {
		return
	}
	share, n := l.lostShare(now)
	if n < probeSamples {
		return
	}
	dev := diffDev(l.loss.floor, n, l.loss.floorN)
	switch {
	case share < l.loss.floor-lossMargin-2*dev:
		l.loss.floor, l.loss.floorN = share, n
	case share <= l.loss.floor+lossMargin+2*dev:
		m := min(l.loss.floorN, floorWeight)
		l.loss.floor = (l.loss.floor*float64(m) + share*float64(n)) / float64(m+n)
		l.loss.floorN = m + n
	default:
		return
	}
	l.loss.refined = now
	if l.loss.floor < minFloor {
		l.loss.floor, l.loss.floorN = 0, 0
	}
}

// attempts is how many queries a question may take at most: base, or on
// a lossy path as many as make losing them all less likely than
// lossGiveUp, up to maxAttempts.
func (l *limiter) attempts(base int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loss.floor <= 0 {
		return base
	}
	// The floor's upper bound: a floor measured low by chance would
	// give up on names the path only failed to carry.
	p := min(l.loss.floor+2*math.Sqrt(l.loss.floor*(1-l.loss.floor)/float64(max(l.loss.floorN, 1))), maxFloor)
	k := int(math.Ceil(math.Log(lossGiveUp) / math.Log(p)))
	return max(base, min(k, maxAttempts))
}
