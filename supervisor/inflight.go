package supervisor

import "sync"

// hostFlights counts the requests in flight to each host and remembers
// the most there ever were to one host at once: the politeness rules say
// one, and this is what shows it (Heartbeat.HostInFlight). Every request
// the supervisor makes goes through Supervisor.request, which counts it
// here.
type hostFlights struct {
	mu   sync.Mutex
	n    map[string]int
	most int
}

func (f *hostFlights) start(host string) {
	f.mu.Lock()
	if f.n == nil {
		f.n = make(map[string]int)
	}
	f.n[host]++
	f.most = max(f.most, f.n[host])
	f.mu.Unlock()
}

func (f *hostFlights) end(host string) {
	f.mu.Lock()
	if f.n[host] <= 1 {
		delete(f.n, host)
	} else {
		f.n[host]--
	}
	f.mu.Unlock()
}

// hosts lists the hosts with a request in flight now (wire.Hello.Busy).
func (f *hostFlights) hosts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.n) == 0 {
		return nil
	}
	out := make([]string, 0, len(f.n))
	for h := range f.n {
		out = append(out, h)
	}
	return out
}

// max is the most requests that were ever in flight to one host at once.
func (f *hostFlights) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most
}

// repeated counts the requests that went out again without being asked:
// nothing below the politeness rules may retry one (the fetcher makes
// sure of it, and counts any it could not prevent).
func (s *Supervisor) repeated() int64 {
	return s.fetcher.Stats().Repeated
}
