package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"sort"

	"backfill/fetch"
)

// Failed pages across runs. A page whose fetch failed is done in the
// frontier, with its class and status in seen and the fetches of it that
// failed in a row in seen.attempts. When Run begins on a state an earlier
// process left (a rerun on the same state directory), each such page that
// an incomplete record still wants is queued again if its failure may
// have passed (a transient class, see transient) and it has failed fewer
// than Config.RetryAttempts times; with Config.RetryFailed every failed
// page is, whatever its class and count. What was queued again is
// counted by class in Summary.Retried; what was kept, in
// Summary.RetryKept (permanent failures) and Summary.RetryExhausted
// (transient ones out of attempts). Within one process a page is fetched
// at most once: a supervisor already waits and retries a page answered
// 429 or 503 (up to three times) before it answers with the failure.

// DefaultRetryAttempts is Config.RetryAttempts when zero.
const DefaultRetryAttempts = 3

// classBlacklisted is the class the supervisor answers with when the host
// or its address was blacklisted: for the run, or by a list the user may
// have changed (the supervisor owns it; the dispatcher does not import it).
const classBlacklisted = "blacklisted"

// transient reports whether a page that failed with class (and, for a bad
// status, HTTP status) may succeed when fetched again later: the host was
// down, slow, overloaded or throttling, its robots.txt could not be had,
// or its address was refused under flags a rerun may change. A 404, a 410,
// a robots.txt rule, a page too large or not HTML fail again.
func transient(class string, status int) bool {
	switch fetch.Class(class) {
	case fetch.ClassDNS, fetch.ClassDNSTimeout, fetch.ClassConnect, fetch.ClassTimeout, fetch.ClassBlocked, fetch.ClassRobotsUnavailable:
		return true
	case fetch.ClassStatus:
		return status == http.StatusTooManyRequests || status >= 500 && status <= 599
	}
	return class == classBlacklisted
}

// retryChunk is how many failed pages retryFailed looks at in one step.
const retryChunk = 4096

// retryFailed queues again the failed pages of earlier processes, as the
// comment at the top of this file says, retryChunk of them (in key order,
// through the urls_failed index) per call: Run calls it when it begins
// and then once per step until every failed page was looked at, so a
// state with millions of them still starts handing out tasks at once.
// Callers hold mu with the state transaction open.
func (d *Dispatcher) retryFailed(ctx context.Context) error {
	if !d.retryBegun {
		d.retryBegun, d.retryPending = true, true
		d.retryAfter = math.MinInt64 // keys are hashes: half of them negative
	}
	if !d.retryPending {
		return nil
	}
	rows, err := query(ctx, d.st.q.failedPages, d.started.UnixNano(), d.retryAfter, retryChunk)
	if err != nil {
		return fmt.Errorf("dispatcher: state failed pages: %w", err)
	}
	type failed struct {
		id                     int64
		depth, status, attempt int
		class                  string
	}
	var fs []failed
	n := 0
	for rows.Next() {
		var f failed
		var wanted bool
		if err := rows.Scan(&f.id, &f.depth, &f.class, &f.status, &f.attempt, &wanted); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state failed pages: %w", err)
		}
		n++
		d.retryAfter = f.id
		if wanted {
			fs = append(fs, f)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state failed pages: %w", err)
	}
	attempts := d.cfg.RetryAttempts
	switch {
	case attempts == 0:
		attempts = DefaultRetryAttempts
	case attempts < 0:
		attempts = 0 // none: every transient failure is out of attempts
	}
	for _, f := range fs {
		switch {
		case d.cfg.RetryFailed:
		case !transient(f.class, f.status):
			d.retryKept++
			continue
		case f.attempt >= attempts:
			d.retryExhausted++
			continue
		}
		if queued, err := d.requeueDone(ctx, f.id, "", f.depth); err != nil {
			return err
		} else if queued {
			d.retried[f.class]++
		}
	}
	if n == retryChunk {
		return nil // more next step
	}
	d.retryPending = false
	if len(d.retried) > 0 || d.retryKept > 0 || d.retryExhausted > 0 {
		classes := make([]string, 0, len(d.retried))
		for c := range d.retried {
			classes = append(classes, fmt.Sprintf("%s=%d", c, d.retried[c]))
		}
		sort.Strings(classes)
		d.log.Info("failed pages of earlier runs", "queued_again", classes, "kept_permanent", d.retryKept,
			"kept_out_of_attempts", d.retryExhausted, "attempts", attempts, "retry_failed", d.cfg.RetryFailed)
	}
	return nil
}

// requeueDone queues a done (or dropped) task again at depth, with its
// URL norm ("": the one the state kept, a failed page's), and puts it in
// the window as a new task goes (window.add keeps the order; it used to
// send the next refill back to the start of the queue, to read every
// queued task again). It reports false, changing nothing, when the task is
// queued already: records taken in together judge their links on one
// reading of the state, so the second to reach a stale page finds it done
// although the first has just queued it.
func (d *Dispatcher) requeueDone(ctx context.Context, key int64, norm string, depth int) (bool, error) {
	var state int
	if err := d.st.q.urlState.QueryRowContext(ctx, key).Scan(&state); err != nil {
		return false, fmt.Errorf("dispatcher: state of a task to queue again: %w", err)
	}
	if state == stateQueued {
		return false, nil
	}
	d.nextSeq++
	var arg any
	if norm != "" {
		arg = norm
	}
	t := &task{key: key, depth: depth, seq: d.nextSeq}
	var u sql.NullString
	var matched, render int
	if err := d.st.q.urlRequeue.QueryRowContext(ctx, d.nextSeq, depth, arg, key).Scan(&u, &matched, &t.priority, &render, &t.level); err != nil {
		return false, fmt.Errorf("dispatcher: state requeue: %w", err)
	}
	d.queuedN++
	t.url, t.matched, t.render = u.String, matched == 1, render == 1
	t.base = levelValue(t.level)
	t.value, t.keep = t.base, true
	t.host, t.domain = hostDomain(t.url)
	d.pagesLeft.add(t.host, t.depth, 1)
	if t.host == "" {
		// refill drops it, saying why.
		d.w.spilled, d.w.cursor = true, nil
		return true, nil
	}
	d.w.add(t, false)
	return true, nil
}
