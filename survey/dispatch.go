package survey

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"backfill/wire"
)

// Cluster is how a survey reaches its supervisors: the intake it listens
// on and who may join. The same supervisors that crawl do the probing
// (their Config.Prober); a one-machine survey is this with supervisors in
// the same process on loopback.
type Cluster struct {
	Listen     string    // intake endpoint; default tcp://127.0.0.1:*
	Keys       wire.Keys // CURVE pair of the survey's dispatcher; zero: plaintext (loopback only unless Insecure)
	Authorized []string  // supervisor public keys allowed in
	Insecure   bool
	// Expect is how many supervisors to wait for before dispatching; 0
	// starts with the first.
	Expect int
	// Lease is how long a task may go unanswered before it is sent
	// again; every heartbeat of its supervisor that lists the task as
	// held renews it, so it runs out only for a task its supervisor lost
	// (dropped at capacity, or its answer not sent). It should span
	// several heartbeats. Default DefaultLease.
	Lease time.Duration
	// Heartbeat is the supervisors' heartbeat interval; one silent for
	// three of them is dropped and its tasks sent elsewhere. Default 2s.
	Heartbeat time.Duration
	// Listening, when set, is called with the bound intake endpoint once
	// the survey listens (one-machine runs start their supervisors then).
	Listening func(endpoint string)
}

// Defaults of Cluster.
const (
	DefaultLease     = 2 * time.Minute
	defaultHeartbeat = 2 * time.Second
	maxAttempts      = 3 // a task whose supervisor failed it this often gets an error row
	recvPoll         = 20 * time.Millisecond
	recvBatch        = 256 // messages taken in one go before leases and silence are judged
	sendTimeout      = time.Second
	commitEvery      = 100 * time.Millisecond
)

// member is one supervisor of the survey.
type member struct {
	name     string
	endpoint string
	capacity int
	started  time.Time
	lastSeen time.Time
	sender   *wire.Sender
	tasks    map[string]*task
}

// dispatch hands a run's tasks to supervisors and turns their results
// into committed rows. One goroutine (run) owns all of it.
type dispatch struct {
	cfg  Cluster
	log  *slog.Logger
	job  string
	spec wire.SurveySpec // Rate is the whole survey's; each member gets its share
	rows func(t *task, r *wire.SurveyResult) []row
	// commit writes rows and marks tasks done, then shows the rows.
	commit func(ctx context.Context, rows []row, done []string) error

	in      *wire.Receiver
	members map[string]*member
	queue   []*task          // waiting, in dispatch order
	flying  map[string]*task // sent, by id
	lease   map[string]int64 // latest lease of each task sent
	owner   map[string]string
	deadl   map[string]time.Time
	refused map[string]bool // supervisors refused, logged once

	pendRows   []row
	pendDone   []string
	lastCommit time.Time

	stats dispatchStats
}

type dispatchStats struct {
	Members  int // supervisors that joined
	Resent   int // tasks sent again (lease expired, supervisor lost or failed)
	Dropped  int // supervisors dropped for silence
	Refused  int // supervisors refused (no survey support, security)
	BadFrame int64
}

func newDispatch(cfg Cluster, log *slog.Logger, job string, spec wire.SurveySpec) (*dispatch, error) {
	if cfg.Listen == "" {
		cfg.Listen = "tcp://127.0.0.1:*"
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = defaultHeartbeat
	}
	in, err := wire.ListenSecure(cfg.Listen, wire.Security{Keys: cfg.Keys, Authorized: cfg.Authorized, Insecure: cfg.Insecure})
	if err != nil {
		return nil, fmt.Errorf("survey: %w", err)
	}
	return &dispatch{
		cfg: cfg, log: log, job: job, spec: spec, in: in,
		members: map[string]*member{}, flying: map[string]*task{}, lease: map[string]int64{},
		owner: map[string]string{}, deadl: map[string]time.Time{}, refused: map[string]bool{},
	}, nil
}

// run dispatches tasks until every one is answered and committed, or ctx
// ends. It closes the sockets before returning.
func (d *dispatch) run(ctx context.Context, tasks []*task) error {
	defer d.close()
	d.queue = tasks
	if d.cfg.Listening != nil {
		d.cfg.Listening(d.in.Endpoint())
	}
	d.log.Info("survey listening", "endpoint", d.in.Endpoint(), "job", d.job, "tasks", len(tasks))
	for len(d.queue) > 0 || len(d.flying) > 0 || len(d.pendRows) > 0 {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, d.flush(context.WithoutCancel(ctx)))
		}
		if err := d.receive(); err != nil {
			return err
		}
		now := time.Now()
		d.expire(now)
		d.assign(now)
		if len(d.pendRows) > 0 && (now.Sub(d.lastCommit) >= commitEvery || (len(d.queue) == 0 && len(d.flying) == 0)) {
			if err := d.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// receive waits up to recvPoll for a message, then takes every one
// already queued (up to recvBatch): silence and leases are judged after
// what has arrived is read, not while a heartbeat or an answer waits in
// the queue behind a slow commit.
func (d *dispatch) receive() error {
	wait := recvPoll
	for range recvBatch {
		kind, v, err := d.in.Recv(wait)
		switch {
		case err == nil:
			d.handle(kind, v)
		case errors.Is(err, wire.ErrBadFrame):
			d.stats.BadFrame++
			d.log.Warn("bad frame on the survey intake dropped", "err", err)
		case errors.Is(err, wire.ErrTimeout):
			return nil
		default:
			return fmt.Errorf("survey: intake: %w", err)
		}
		wait = 0
	}
	return nil
}

func (d *dispatch) flush(ctx context.Context) error {
	d.lastCommit = time.Now()
	if len(d.pendRows) == 0 && len(d.pendDone) == 0 {
		return nil
	}
	err := d.commit(ctx, d.pendRows, d.pendDone)
	d.pendRows, d.pendDone = nil, nil
	return err
}

func (d *dispatch) close() {
	for _, m := range d.members {
		m.sender.Close()
	}
	d.in.Close()
}

func (d *dispatch) handle(kind wire.Kind, v any) {
	switch kind {
	case wire.KindHello:
		d.hello(*v.(*wire.Hello))
	case wire.KindHeartbeat:
		hb := v.(*wire.Heartbeat)
		d.hello(hb.Hello)
		d.renew(hb.Supervisor, hb.Surveys)
	case wire.KindSurveyResult:
		d.result(v.(*wire.SurveyResult))
	case wire.KindResult:
		d.log.Warn("crawl result on a survey intake dropped")
	}
}

// hello registers a supervisor (or notes it is alive): a new one, or one
// whose process restarted, is dialled back and welcomed.
func (d *dispatch) hello(h wire.Hello) {
	now := time.Now()
	if m := d.members[h.Supervisor]; m != nil && m.started.Equal(h.Started) && m.endpoint == h.Endpoint {
		m.lastSeen = now
		return
	} else if m != nil {
		d.log.Info("supervisor restarted; its tasks go back in the queue", "supervisor", h.Supervisor)
		d.drop(m)
	}
	sec, ok := d.security(h)
	if !ok {
		return
	}
	s, err := wire.DialSecure(h.Endpoint, sec)
	if err != nil {
		d.refuse(h, "cannot dial its task endpoint: "+err.Error())
		return
	}
	if err := s.Send(wire.KindWelcome, wire.Welcome{Dispatcher: "survey", Run: d.job}, sendTimeout); err != nil {
		s.Close()
		d.log.Warn("welcome not sent; waiting for the next hello", "supervisor", h.Supervisor, "err", err)
		return
	}
	capacity := max(h.Capacity, 1)
	d.members[h.Supervisor] = &member{name: h.Supervisor, endpoint: h.Endpoint, capacity: capacity, started: h.Started,
		lastSeen: now, sender: s, tasks: map[string]*task{}}
	d.stats.Members++
	clear(d.owner) // membership changed: routes are computed again
	d.log.Info("supervisor joined the survey", "supervisor", h.Supervisor, "endpoint", h.Endpoint, "capacity", capacity)
}

// renew extends the leases of the tasks a member says it holds.
func (d *dispatch) renew(name string, held []string) {
	m := d.members[name]
	if m == nil {
		return
	}
	until := time.Now().Add(d.cfg.Lease)
	for _, id := range held {
		if _, ok := m.tasks[id]; ok {
			d.deadl[id] = until
		}
	}
}

// security decides whether a supervisor may have survey tasks and how its
// task socket is dialled, as the crawl's dispatcher does.
func (d *dispatch) security(h wire.Hello) (wire.Security, bool) {
	if !h.Survey {
		d.refuse(h, "it does not run surveys")
		return wire.Security{}, false
	}
	if d.cfg.Keys.IsZero() {
		if !d.cfg.Insecure && !wire.Loopback(h.Endpoint) {
			d.refuse(h, "plaintext to a task endpoint that is not loopback (secure the cluster with keys, or allow insecure)")
			return wire.Security{}, false
		}
		return wire.Security{Insecure: d.cfg.Insecure}, true
	}
	if h.Key == "" || !slices.Contains(d.cfg.Authorized, h.Key) {
		d.refuse(h, "its task socket's key is not among the authorized keys")
		return wire.Security{}, false
	}
	return wire.Security{Keys: d.cfg.Keys, ServerKey: h.Key}, true
}

func (d *dispatch) refuse(h wire.Hello, why string) {
	key := h.Supervisor + "\x00" + h.Endpoint + "\x00" + why
	if !d.refused[key] {
		d.refused[key] = true
		d.stats.Refused++
		d.log.Error("supervisor refused: "+why, "supervisor", h.Supervisor, "endpoint", h.Endpoint)
	}
}

// drop forgets a member and puts its tasks back at the head of the queue.
func (d *dispatch) drop(m *member) {
	var back []*task
	for id, t := range m.tasks {
		delete(d.flying, id)
		back = append(back, t)
	}
	slices.SortFunc(back, func(a, b *task) int { return int(a.seq - b.seq) })
	d.stats.Resent += len(back)
	d.queue = append(back, d.queue...)
	m.sender.Close()
	delete(d.members, m.name)
	clear(d.owner)
}

// expire drops silent members and takes back tasks whose lease ran out.
func (d *dispatch) expire(now time.Time) {
	for _, m := range d.members {
		if now.Sub(m.lastSeen) > 3*d.cfg.Heartbeat {
			d.log.Warn("supervisor silent for three heartbeats: dropped, its tasks go elsewhere", "supervisor", m.name, "tasks", len(m.tasks))
			d.stats.Dropped++
			d.drop(m)
		}
	}
	for id, t := range d.flying {
		if now.After(d.deadl[id]) {
			for _, m := range d.members {
				delete(m.tasks, id)
			}
			delete(d.flying, id)
			d.stats.Resent++
			d.queue = append([]*task{t}, d.queue...)
			d.log.Warn("survey task lease expired; sent again", "task", id, "ip", t.ip)
		}
	}
}

// assign sends waiting tasks to their owners while they have room. Every
// address of one /24 (/48) has the same owner, so the per-/24 cap of each
// supervisor holds for the survey.
func (d *dispatch) assign(now time.Time) {
	if len(d.members) == 0 || len(d.members) < d.cfg.Expect || len(d.queue) == 0 {
		return
	}
	spec := d.spec
	spec.Rate = d.spec.Rate / float64(len(d.members))
	full := 0
	kept := d.queue[:0]
	for i, t := range d.queue {
		if full == len(d.members) {
			kept = append(kept, d.queue[i:]...)
			break
		}
		m := d.route(t.ip)
		if len(m.tasks) >= m.capacity {
			kept = append(kept, t)
			continue
		}
		d.lease[t.id]++
		wt := wire.SurveyTask{ID: t.id, Lease: d.lease[t.id], Job: d.job, IP: t.ip, Ports: t.ports, Spec: spec}
		if d.job == wire.SurveyWeb {
			wt.Hosts = t.names()
		}
		if err := m.sender.Send(wire.KindSurveyTask, wt, sendTimeout); err != nil {
			d.log.Warn("survey task not sent; it waits", "supervisor", m.name, "task", t.id, "err", err)
			kept = append(kept, t)
			continue
		}
		m.tasks[t.id] = t
		d.flying[t.id] = t
		d.deadl[t.id] = now.Add(d.cfg.Lease)
		if len(m.tasks) == m.capacity {
			full++
		}
	}
	d.queue = kept
}

// route is the owner of ip's /24 (/48): the member of highest rendezvous
// weight, so a membership change moves only the blocks of the members that
// came or went.
func (d *dispatch) route(ip string) *member {
	key := ip
	if a, err := netip.ParseAddr(ip); err == nil {
		key = block(a).String()
	}
	if name, ok := d.owner[key]; ok {
		if m := d.members[name]; m != nil {
			return m
		}
	}
	var best *member
	var bestW uint64
	for _, m := range d.members {
		h := fnv.New64a()
		h.Write([]byte(m.name))
		h.Write([]byte{0})
		h.Write([]byte(key))
		if w := splitmix(h.Sum64()); best == nil || w > bestW {
			best, bestW = m, w
		}
	}
	d.owner[key] = best.name
	return best
}

// result takes a supervisor's answer: the first answer to a task not yet
// done is kept, whatever its lease; later ones change nothing.
func (d *dispatch) result(r *wire.SurveyResult) {
	if m := d.members[r.Supervisor]; m != nil {
		m.lastSeen = time.Now()
	}
	var t *task
	if ft := d.flying[r.TaskID]; ft != nil {
		t = ft
		delete(d.flying, r.TaskID)
		for _, m := range d.members {
			delete(m.tasks, r.TaskID)
		}
	} else if i := slices.IndexFunc(d.queue, func(q *task) bool { return q.id == r.TaskID }); i >= 0 {
		t = d.queue[i]
		d.queue = slices.Delete(d.queue, i, i+1)
	} else {
		return // done already, or not ours
	}
	if r.Error != "" {
		t.attempts++
		d.log.Warn("survey task failed on a supervisor", "task", t.id, "ip", t.ip, "supervisor", r.Supervisor, "err", r.Error, "attempt", t.attempts)
		if t.attempts < maxAttempts {
			d.stats.Resent++
			d.queue = append(d.queue, t)
			return
		}
	}
	d.pendRows = append(d.pendRows, d.rows(t, r)...)
	d.pendDone = append(d.pendDone, t.id)
}
