package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"backfill/fetch"
	"backfill/wire"
)

// Host health: how the supervisor keeps away from hosts and addresses in
// trouble. Every request's outcome is reported to the health registry:
//
//   - a 429 or 503 with Retry-After (seconds or an HTTP date) keeps the
//     host's next request from starting before that time; the page is
//     queued again on its host and retried after the wait, up to
//     maxAttempts times, then answered with its class;
//   - consecutive 5xx answers and network failures (dns, connect, tls,
//     timeout, protocol, blocked-address) back the host off exponentially:
//     base × 2^n after n of them, capped at MaxBackoff, where base is the
//     host's delay (at least BackoffMin);
//   - a host with autoNetFails consecutive network failures or
//     autoServerFails consecutive 5xx answers is blacklisted for the rest
//     of the run, and so is an address (ip:port) with as many: the reason
//     is logged once at Warn and counted, the host's tasks are answered
//     "blacklisted" without requests, and the fetcher refuses to dial the
//     address (Config.DenyAddr), whatever host name leads there.
//
// Any other answer (2xx, 3xx, 4xx but 429, content failures) means the
// host and address are reachable and clears their counts.
//
// A user blacklist (Config.Blacklist, from a file) adds hosts, refused by
// the supervisor, and IPs and CIDRs, refused by the fetcher at dial time.

// Classes of the host health machinery. Append only: they cross the wire.
const (
	ClassBlacklisted = string(fetch.ClassBlacklisted) // host or address blacklisted; no request made
)

// Defaults of the Config fields for trouble.
const (
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultBackoffMin  = time.Second
	DefaultRobotsRetry = time.Minute
)

const (
	maxAttempts     = 3  // requests of one page answered 429/503 before its class is given
	autoNetFails    = 5  // consecutive network failures that blacklist a host or address
	autoServerFails = 10 // consecutive 5xx answers that blacklist a host or address
	maxRetryAfter   = 24 * time.Hour
)

// trouble is what one request's outcome says about its host.
type trouble int

const (
	troubleNone     trouble = iota // answered: the host is fine
	troubleNetwork                 // never answered
	troubleServer                  // 5xx
	troubleThrottle                // 429 (503 is troubleServer with a wait)
	troubleIgnore                  // canceled: says nothing
)

// troubleOf classifies a fetch outcome for host health.
func troubleOf(resp *fetch.Response, err error) trouble {
	if resp != nil && resp.Status != 0 {
		switch {
		case resp.Status == http.StatusTooManyRequests:
			return troubleThrottle
		case resp.Status >= 500 && resp.Status <= 599:
			return troubleServer
		}
		return troubleNone
	}
	switch fetch.ClassOf(err) {
	case fetch.ClassDNS, fetch.ClassDNSTimeout, fetch.ClassConnect, fetch.ClassTLS, fetch.ClassTimeout,
		fetch.ClassProtocol, fetch.ClassBlocked:
		return troubleNetwork
	case fetch.ClassCanceled:
		return troubleIgnore
	}
	return troubleNone
}

// networkClass reports the fetch classes that mean a host could not be
// reached at all.
func networkClass(c fetch.Class) bool {
	switch c {
	case fetch.ClassDNS, fetch.ClassDNSTimeout, fetch.ClassConnect, fetch.ClassTLS, fetch.ClassTimeout,
		fetch.ClassProtocol, fetch.ClassBlocked:
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP
// date, as a wait from now; ok is false when it is absent or unusable.
// Waits are capped at a day: a larger one is no plan a crawl can keep.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// hostPause is the wait after n consecutive failures: base × 2^n, at most
// ceiling. It is politeness, not a retry of our own: exact and without
// jitter (package backoff), so a host's pause never falls below what its
// failures earned.
func hostPause(base time.Duration, n int, ceiling time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	if base <= 0 {
		base = time.Millisecond
	}
	d := base
	for range n {
		if d >= ceiling/2 {
			return ceiling
		}
		d *= 2
	}
	return min(d, ceiling)
}

// hostHealth is the trouble state of one host or address.
type hostHealth struct {
	netFails    int
	serverFails int
	notBefore   time.Time // no request before this (Retry-After, back-off)
	why         string    // what set notBefore
	class       string    // the class of the failure that set notBefore
	blacklisted string    // reason; "" while not blacklisted
}

// failures is the number of consecutive failures of either kind.
func (hh *hostHealth) failures() int { return max(hh.netFails, hh.serverFails) }

// health is the registry of host and address health. Safe for concurrent
// use. Entries of healthy hosts are dropped, so it holds only hosts and
// addresses in trouble, and at most maxTracked of each: past that the
// least recently seen is forgotten. A forgotten host still held back
// (Retry-After, back-off) leaves its wait with spill, which the
// supervisor writes to the host cache as the host's last request, so the
// wait outlives the entry; a forgotten blacklisting is learned again
// from the host's next failures, which its back-off spaces out.
type health struct {
	log        *slog.Logger
	maxBackoff time.Duration
	backoffMin time.Duration
	userHosts  map[string]string // user-blacklisted host → the file entry (file:line)
	// spill keeps the wait of a host forgotten before it ended; nil
	// drops it.
	spill func(host string, until time.Time)

	mu       sync.Mutex
	hosts    *lru[*hostHealth]
	addrs    *lru[*hostHealth] // "ip:port"
	attempts map[string]int    // task ID → requests answered 429/503

	blacklisted atomic.Int64 // hosts and addresses blacklisted during the run
}

func newHealth(log *slog.Logger, maxBackoff, backoffMin time.Duration, bl fetch.Blacklist, maxTracked int) *health {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hs := &health{
		log: log, maxBackoff: maxBackoff, backoffMin: backoffMin,
		userHosts: map[string]string{},
		addrs:     newLRU[*hostHealth](maxTracked, nil),
		attempts:  map[string]int{},
	}
	hs.hosts = newLRU(maxTracked, hs.forgotten)
	for _, e := range bl.Hosts {
		hs.userHosts[e.Host] = e.Where
	}
	return hs
}

// refused says why a host gets no requests at all: a user blacklist entry
// for it or a parent domain, or an automatic blacklisting; "" if none.
// record counts one outcome: a success clears the streaks, a failure
// lengthens its own streak and ends the other kind's.
func (hh *hostHealth) record(tr trouble) {
	switch tr {
	case troubleNone:
		hh.netFails, hh.serverFails = 0, 0
	case troubleNetwork:
		hh.netFails++
		hh.serverFails = 0
	case troubleServer:
		hh.serverFails++
		hh.netFails = 0
	}
}

func (hs *health) refused(hostPort string) string {
	name := hostPort
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	name = strings.TrimSuffix(name, ".")
	for d := name; d != ""; {
		if where, ok := hs.userHosts[d]; ok {
			return fmt.Sprintf("host %s is on the user blacklist (%s)", hostPort, where)
		}
		i := strings.IndexByte(d, '.')
		if i < 0 {
			break
		}
		d = d[i+1:]
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hh, _ := hs.hosts.get(hostPort); hh != nil && hh.blacklisted != "" {
		return hh.blacklisted
	}
	return ""
}

// forgotten is called for a host entry the registry let go, under mu.
func (hs *health) forgotten(host string, hh *hostHealth) {
	if hs.spill != nil && hh.notBefore.After(time.Now()) {
		hs.spill(host, hh.notBefore)
	}
}

// wait reports when the host's next request may start, and why, or a zero
// time when nothing holds it back.
func (hs *health) wait(host string) (time.Time, string, string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hh, _ := hs.hosts.get(host)
	if hh == nil {
		return time.Time{}, "", ""
	}
	return hh.notBefore, hh.why, hh.class
}

// backoffs lists up to n hosts whose requests are held back at now,
// the latest to be let go first.
func (hs *health) backoffs(now time.Time, n int) []wire.HostBackoff {
	hs.mu.Lock()
	var l []wire.HostBackoff
	hs.hosts.each(func(name string, hh *hostHealth) bool {
		if hh.notBefore.After(now) {
			l = append(l, wire.HostBackoff{Host: name, Until: hh.notBefore.UTC(), Class: hh.class, Failures: hh.failures(), Why: hh.why})
		}
		return true
	})
	hs.mu.Unlock()
	slices.SortFunc(l, func(a, b wire.HostBackoff) int {
		return cmp.Or(b.Until.Compare(a.Until), cmp.Compare(a.Host, b.Host))
	})
	return l[:min(n, len(l))]
}

// inBackoff counts the hosts whose requests are held back at now.
func (hs *health) inBackoff(now time.Time) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	hs.hosts.each(func(_ string, hh *hostHealth) bool {
		if hh.notBefore.After(now) {
			n++
		}
		return true
	})
	return n
}

// addrRefused is Config.DenyAddr: the reason an address is blacklisted,
// or "".
func (hs *health) addrRefused(ap netip.AddrPort) string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hh, _ := hs.addrs.get(ap.String()); hh != nil && hh.blacklisted != "" {
		return "blacklisted: " + hh.blacklisted
	}
	return ""
}

// addrBlacklisted reports whether addr ("ip:port") is blacklisted.
func (hs *health) addrBlacklisted(addr string) bool {
	if addr == "" {
		return false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hh, _ := hs.addrs.get(addr)
	return hh != nil && hh.blacklisted != ""
}

// observe records the outcome of a request to host that ended at end, with
// the host's delay base, and returns when the host's next request may
// start at the earliest because of trouble (zero when nothing holds it
// back) and whether the answer was a 429 or 503 that asks for a retry.
func (hs *health) observe(host string, resp *fetch.Response, err error, base time.Duration, end time.Time) (time.Time, bool) {
	tr := troubleOf(resp, err)
	if tr == troubleIgnore {
		return time.Time{}, false
	}
	addr := ""
	if resp != nil {
		addr = resp.RemoteAddr
	}
	var fe *fetch.Error
	if addr == "" && errors.As(err, &fe) {
		addr = fe.RemoteAddr
	}
	class := string(fetch.ClassOf(err))
	if class == "" && tr != troubleNone {
		class = string(fetch.ClassStatus)
	}
	base = max(base, hs.backoffMin)

	hs.mu.Lock()
	defer hs.mu.Unlock()
	hh, _ := hs.hosts.get(host)
	if hh == nil {
		if tr == troubleNone {
			hs.observeAddr(addr, tr, class, err)
			return time.Time{}, false
		}
		hh = &hostHealth{}
		hs.hosts.put(host, hh)
	}
	throttled := false
	hh.record(tr)
	wait := hostPause(base, hh.failures(), hs.maxBackoff)
	why := ""
	if wait > 0 {
		why = fmt.Sprintf("backing off %v after %d consecutive failures", wait, hh.failures())
	}
	if tr == troubleThrottle || (resp != nil && resp.Status == http.StatusServiceUnavailable) {
		throttled = true
		if ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), end); ok {
			wait, why = ra, fmt.Sprintf("answered %d with Retry-After %v", resp.Status, ra)
		} else if tr == troubleThrottle {
			// A 429 without a wait backs off like one more failure.
			wait = hostPause(base, hh.failures()+1, hs.maxBackoff)
			why = fmt.Sprintf("answered 429; backing off %v", wait)
		}
	}
	if wait > 0 {
		hh.notBefore, hh.why, hh.class = end.Add(wait), why, class
	}
	if hh.blacklisted == "" {
		switch {
		case hh.netFails >= autoNetFails:
			hs.blacklist(hh, "host", host, fmt.Sprintf("%d consecutive network failures, the last: %v", hh.netFails, err))
		case hh.serverFails >= autoServerFails:
			hs.blacklist(hh, "host", host, fmt.Sprintf("%d consecutive server errors, the last: status %d", hh.serverFails, resp.Status))
		}
	}
	if hh.blacklisted == "" && hh.failures() == 0 && !hh.notBefore.After(end) {
		hs.hosts.remove(host)
	}
	hs.observeAddr(addr, tr, class, err)
	return hh.notBefore, throttled
}

// observeAddr keeps the failure counts of an address. Callers hold mu.
// A refused address (blocked-address) was never dialled: it says nothing
// about the address's health.
func (hs *health) observeAddr(addr string, tr trouble, class string, err error) {
	if addr == "" || class == string(fetch.ClassBlocked) {
		return
	}
	hh, _ := hs.addrs.get(addr)
	if hh == nil {
		if tr == troubleNone || tr == troubleThrottle {
			return
		}
		hh = &hostHealth{}
		hs.addrs.put(addr, hh)
	}
	hh.record(tr)
	if hh.blacklisted == "" {
		switch {
		case hh.netFails >= autoNetFails:
			hs.blacklist(hh, "address", addr, fmt.Sprintf("%d consecutive network failures, the last: %v", hh.netFails, err))
		case hh.serverFails >= autoServerFails:
			hs.blacklist(hh, "address", addr, fmt.Sprintf("%d consecutive server errors", hh.serverFails))
		}
	}
	if hh.blacklisted == "" && hh.failures() == 0 {
		hs.addrs.remove(addr)
	}
}

// blacklist marks hh blacklisted for the rest of the run. Callers hold mu.
func (hs *health) blacklist(hh *hostHealth, what, name, reason string) {
	hh.blacklisted = fmt.Sprintf("%s %s blacklisted for this run: %s", what, name, reason)
	hs.blacklisted.Add(1)
	hs.log.Warn(what+" blacklisted for the rest of the run", what, name, "reason", reason)
}

// blacklistHost blacklists a host whose address is blacklisted, so its
// further tasks are answered without dialing.
func (hs *health) blacklistHost(host, reason string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hh, _ := hs.hosts.get(host)
	if hh == nil {
		hh = &hostHealth{}
		hs.hosts.put(host, hh)
	}
	if hh.blacklisted == "" {
		hs.blacklist(hh, "host", host, reason)
	}
}

// attempt counts one more 429/503 answer for task id and reports whether
// the task may be tried again.
func (hs *health) attempt(id string) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.attempts[id]++
	if hs.attempts[id] >= maxAttempts {
		delete(hs.attempts, id)
		return false
	}
	return true
}

// settled forgets the attempts of a task that got its answer: finishSafe
// calls it for every task answered, whichever way.
func (hs *health) settled(id string) {
	hs.mu.Lock()
	delete(hs.attempts, id)
	hs.mu.Unlock()
}

// troubled answers or holds back a host in trouble at the start of its
// turn: a blacklisted host's first task is answered "blacklisted"; a host
// that asked to be left alone (Retry-After) or is backing off waits, and
// when the wait is longer than MaxBackoff its first task is answered with
// the class that caused it instead of being held that long. Nothing
// happens (zero time, nil) for a healthy host.
func (s *Supervisor) troubled(h *host, popped **wire.Task, now time.Time) (time.Time, *page) {
	if why := s.health.refused(h.name); why != "" {
		t := s.popInto(h, popped)
		return now, &page{task: t, res: s.answer(t, ClassBlacklisted, why)}
	}
	at, why, class := s.health.wait(h.name)
	if !at.After(now) {
		return time.Time{}, nil
	}
	if at.Sub(now) <= s.cfg.MaxBackoff {
		return at, nil
	}
	t := s.popInto(h, popped)
	if class == "" {
		class = string(fetch.ClassStatus)
	}
	return now, &page{task: t, res: s.answer(t, class,
		fmt.Sprintf("%s %s; not waiting until %s, over the %v ceiling", h.name, why, at.UTC().Format(time.RFC3339), s.cfg.MaxBackoff))}
}

// afterFetch records a page request's outcome and decides what follows: a
// 429 or 503, or a request a kept-alive connection lost unanswered
// (fetch.ErrUnanswered), with attempts left puts the task back at the
// front of its host, to be tried again once the host may be asked again
// (retry true); otherwise the page goes on to be finished. next is when the host's next
// request may start: after the delay, and after any wait trouble asks for.
//
// A fetch refused because the address it leads to is blacklisted comes
// back as class "blacklisted" (and the host is blacklisted with it), not
// as the fetcher's blocked-address.
func (s *Supervisor) afterFetch(h *host, t *wire.Task, resp *fetch.Response, err error, end time.Time, delay time.Duration) (next time.Time, retry bool, _ error) {
	next = end.Add(delay)
	notBefore, throttled := s.health.observe(h.name, resp, err, delay, end)
	if notBefore.After(next) {
		next = notBefore
	}
	if throttled && next.Sub(end) <= s.cfg.MaxBackoff && s.health.attempt(t.ID) {
		s.sched.requeue(h, t)
		return next, true, err
	}
	if errors.Is(err, fetch.ErrUnanswered) && s.health.attempt(t.ID) {
		// A kept-alive connection lost the request before any answer:
		// it is made again, as a request of its own after the delay.
		s.unansweredRetries.Add(1)
		s.sched.requeue(h, t)
		return next, true, err
	}
	return next, false, s.blacklistedAddr(h.name, err)
}

// blacklistedAddr turns a blocked-address error whose address is
// blacklisted into a "blacklisted" one, and blacklists the host too.
func (s *Supervisor) blacklistedAddr(hostName string, err error) error {
	var fe *fetch.Error
	if !errors.As(err, &fe) || fe.Class != fetch.ClassBlocked || !s.health.addrBlacklisted(fe.RemoteAddr) {
		return err
	}
	why := fmt.Sprintf("its address %s is blacklisted", fe.RemoteAddr)
	s.health.blacklistHost(hostName, why)
	return &fetch.Error{Class: fetch.Class(ClassBlacklisted), URL: fe.URL, Err: fe.Err, RemoteAddr: fe.RemoteAddr}
}

// requeue puts a popped task back at the front of its held host's queue,
// still holding its capacity. If the dispatcher re-sent the task meanwhile
// (its lease expired), the queued copy with the newer lease stays and this
// one gives its capacity back.
func (s *scheduler) requeue(h *host, t *wire.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range h.tasks {
		if q.ID == t.ID {
			s.held--
			return
		}
	}
	h.tasks = append([]*wire.Task{t}, h.tasks...)
}
