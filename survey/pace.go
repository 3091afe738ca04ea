package survey

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// The prober's politeness, per supervisor: a pacer for the overall rate,
// slots for the connections at once into one /24, and a gate that lets one
// task of an address run at a time and spaces its connections by the
// delay.

// pacer hands out connection times at most rate a second, in order of
// asking, without bursts.
type pacer struct {
	mu   sync.Mutex
	next time.Time
}

func (p *pacer) wait(ctx context.Context, rate float64) error {
	if rate <= 0 {
		return ctx.Err()
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(time.Second) / rate))
	p.mu.Unlock()
	return sleep(ctx, time.Until(at))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// block is the /24 of an IPv4 address, the /48 of an IPv6 one: the unit
// a network operator sees a scan arrive in.
func block(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	bits := 24
	if ip.Is6() {
		bits = 48
	}
	p, _ := ip.Prefix(bits)
	return p
}

// blockSlots bounds the connections at once into one block.
type blockSlots struct {
	mu sync.Mutex
	m  map[netip.Prefix]*slots
}

type slots struct {
	ch    chan struct{}
	users int
}

// acquire takes a slot of ip's block (n at most at once; n ≤ 0: no cap)
// and returns its release.
func (b *blockSlots) acquire(ctx context.Context, ip netip.Addr, n int) (func(), error) {
	if n <= 0 {
		return func() {}, ctx.Err()
	}
	key := block(ip)
	b.mu.Lock()
	if b.m == nil {
		b.m = make(map[netip.Prefix]*slots)
	}
	s := b.m[key]
	if s == nil {
		s = &slots{ch: make(chan struct{}, n)}
		b.m[key] = s
	}
	s.users++
	b.mu.Unlock()
	done := func() {
		b.mu.Lock()
		if s.users--; s.users == 0 {
			delete(b.m, key)
		}
		b.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// ipGate lets one task of an address run at a time and keeps the delay
// between the last connection of one and the first of the next.
type ipGate struct {
	mu sync.Mutex
	m  map[netip.Addr]*ipTurn
}

type ipTurn struct {
	ch    chan struct{} // size 1: held by the task running
	users int
	last  time.Time // end of the address's last connection
}

// enter waits for ip's turn and its delay, and returns the turn; leave
// gives it back.
func (g *ipGate) enter(ctx context.Context, ip netip.Addr, delay time.Duration) (*ipTurn, error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[netip.Addr]*ipTurn)
	}
	t := g.m[ip]
	if t == nil {
		t = &ipTurn{ch: make(chan struct{}, 1)}
		g.m[ip] = t
	}
	t.users++
	g.mu.Unlock()
	select {
	case t.ch <- struct{}{}:
	case <-ctx.Done():
		g.drop(ip, t)
		return nil, ctx.Err()
	}
	if err := sleep(ctx, time.Until(t.last.Add(delay))); err != nil {
		g.leave(ip, t)
		return nil, err
	}
	return t, nil
}

func (g *ipGate) leave(ip netip.Addr, t *ipTurn) {
	t.last = time.Now()
	<-t.ch
	g.drop(ip, t)
}

// drop forgets an address no task is using or waiting for. Its last time
// goes with it: a survey sends each address once per run, so only tasks
// of an address that meet here (of two surveys on the same supervisors,
// or a copy of a task sent again just as its answer left) need it.
func (g *ipGate) drop(ip netip.Addr, t *ipTurn) {
	g.mu.Lock()
	if t.users--; t.users == 0 {
		delete(g.m, ip)
	}
	g.mu.Unlock()
}
