package survey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"backfill/cluster"
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
	key      string // its authenticated key (wire.Peer.Key); "" in a plaintext cluster
	endpoint string
	capacity int
	started  time.Time
	lastSeen time.Time
	sender   *wire.Sender
	tasks    map[string]*task
}

// dispatch hands a run's tasks to supervisors and turns their results
// into committed rows. One goroutine (run) owns all of it. Who may join,
// the leases' tokens, the judging of answers, the quarantine and the
// routing of address blocks are the cluster core's (package cluster), as
// for the crawl.
type dispatch struct {
	cfg  Cluster
	log  *slog.Logger
	job  string
	spec wire.SurveySpec // Rate is the whole survey's; each member gets its share
	rows func(t *task, r *wire.SurveyResult) []row
	// commit writes rows and marks tasks done, then shows the rows.
	commit func(ctx context.Context, rows []row, done []string) error

	in      *wire.Receiver
	admit   cluster.Admission
	tokens  cluster.Tokens
	quar    *cluster.Quarantine
	blocks  *cluster.Balancer // address blocks (/24, /48) to members
	members map[string]*member
	queue   []*task                  // waiting, in dispatch order
	flying  map[string]*task         // sent, by id
	lease   map[string]cluster.Lease // the lease of each task flying
	deadl   map[string]time.Time     // when each flying task's lease runs out (renewed by heartbeats)
	refused map[string]bool          // supervisors refused, logged once

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
	// Late counts answers to leases their sender held and lost; Forged
	// the frames refused as forged (an answer to a lease the sender did
	// not hold, a registration under another member's name), and
	// Quarantined the keys that sent them (see cluster.Quarantine).
	Late        int                   `json:"late"`
	Forged      int                   `json:"forged"`
	Quarantined []cluster.Quarantined `json:"quarantined,omitempty"`
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
	admit := cluster.Admission{Keys: cfg.Keys, Authorized: cfg.Authorized, Insecure: cfg.Insecure}
	in, err := wire.ListenSecure(cfg.Listen, admit.Listen())
	if err != nil {
		return nil, fmt.Errorf("survey: %w", err)
	}
	return &dispatch{
		cfg: cfg, log: log, job: job, spec: spec, in: in,
		admit: admit, tokens: cluster.NewTokens(cluster.NewSecret(), 0), quar: cluster.NewQuarantine(log), blocks: cluster.NewBalancer(),
		members: map[string]*member{}, flying: map[string]*task{}, lease: map[string]cluster.Lease{},
		deadl: map[string]time.Time{}, refused: map[string]bool{},
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
	if w := d.admit.Warning(d.in.Endpoint()); w != "" {
		d.log.Warn(w)
	}
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
		kind, v, from, err := d.in.RecvFrom(wait)
		switch {
		case err == nil:
			d.handle(kind, v, from)
		case errors.Is(err, wire.ErrBadFrame):
			d.stats.BadFrame++
			d.log.Warn("bad frame on the survey intake dropped", "error", err)
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

// handle takes one frame from from. A quarantined key's frames are
// refused (and counted) until the survey's dispatcher restarts.
func (d *dispatch) handle(kind wire.Kind, v any, from wire.Peer) {
	if d.quar.Has(from.Key) {
		d.quar.Add(from, "", "a frame from a quarantined key", time.Now())
		return
	}
	switch kind {
	case wire.KindHello:
		d.hello(*v.(*wire.Hello), from)
	case wire.KindHeartbeat:
		hb := v.(*wire.Heartbeat)
		d.hello(hb.Hello, from)
		d.renew(hb.Supervisor, hb.Surveys, from)
	case wire.KindSurveyResult:
		d.result(v.(*wire.SurveyResult), from)
	case wire.KindResult:
		d.log.Warn("crawl result on a survey intake dropped")
	}
}

// hello registers a supervisor (or notes it is alive): a new one, or one
// whose process restarted, is dialled back and welcomed. A member is its
// key: a Hello under a member's name from another key is an
// impersonation, and its sender is quarantined.
func (d *dispatch) hello(h wire.Hello, from wire.Peer) {
	now := time.Now()
	if m := d.members[h.Supervisor]; m != nil && m.key != from.Key {
		d.forged(from, h.Supervisor, "it registered under the name of another member", now)
		return
	}
	if m := d.members[h.Supervisor]; m != nil && m.started.Equal(h.Started) && m.endpoint == h.Endpoint {
		m.lastSeen = now
		return
	} else if m != nil {
		d.log.Info("supervisor restarted; its tasks go back in the queue", "supervisor", h.Supervisor)
		d.drop(m)
	}
	sec, ok := d.security(h, from, now)
	if !ok {
		return
	}
	if other := d.memberByKey(from.Key); other != nil {
		d.drop(other) // one key, one member: the same supervisor under a new name
	}
	s, err := wire.DialSecure(h.Endpoint, sec)
	if err != nil {
		d.refuse(h, "cannot dial its task endpoint: "+err.Error())
		return
	}
	if err := s.Send(wire.KindWelcome, wire.Welcome{Dispatcher: "survey", Run: d.job}, sendTimeout); err != nil {
		s.Close()
		d.log.Warn("welcome not sent; waiting for the next hello", "supervisor", h.Supervisor, "error", err)
		return
	}
	capacity := max(h.Capacity, 1)
	d.members[h.Supervisor] = &member{name: h.Supervisor, key: from.Key, endpoint: h.Endpoint, capacity: capacity, started: h.Started,
		lastSeen: now, sender: s, tasks: map[string]*task{}}
	d.blocks.Join(h.Supervisor, capacity)
	d.stats.Members++
	d.log.Info("supervisor joined the survey", "supervisor", h.Supervisor, "endpoint", h.Endpoint, "capacity", capacity)
}

// renew extends the leases of the tasks a member says it holds.
func (d *dispatch) renew(name string, held []string, from wire.Peer) {
	m := d.members[name]
	if m == nil || m.key != from.Key {
		return
	}
	until := time.Now().Add(d.cfg.Lease)
	for _, id := range held {
		if _, ok := m.tasks[id]; ok {
			d.deadl[id] = until
		}
	}
}

// security decides whether a supervisor may have survey tasks (it runs
// surveys, and the cluster admits it: cluster.Admission.Admit) and how its
// task socket is dialled. A member that advertises another key's task
// socket is quarantined besides.
func (d *dispatch) security(h wire.Hello, from wire.Peer, now time.Time) (wire.Security, bool) {
	if !h.Survey {
		d.refuse(h, "it does not run surveys")
		return wire.Security{}, false
	}
	sec, err := d.admit.Admit(h, from)
	if err != nil {
		d.refuse(h, err.Error())
		if errors.Is(err, cluster.ErrKeyNotSender) {
			d.forged(from, h.Supervisor, err.Error(), now)
		}
		return wire.Security{}, false
	}
	return sec, true
}

// forged quarantines the key of a frame that claims what its sender was
// not given (cluster.Quarantine: logged, refused from now on) and drops
// the member it is, so its tasks go to the others. A plaintext cluster
// cannot tell who sent it: the frame is only refused and counted.
func (d *dispatch) forged(from wire.Peer, name, why string, now time.Time) {
	d.stats.Forged++
	if !d.quar.Add(from, name, why, now) {
		return
	}
	d.stats.Quarantined = d.quar.List()
	if m := d.memberByKey(from.Key); m != nil {
		d.drop(m)
	}
}

// memberByKey is the member whose authenticated key is key; nil when none
// (or in a plaintext cluster, where no member has one).
func (d *dispatch) memberByKey(key string) *member {
	if key == "" {
		return nil
	}
	for _, m := range d.members {
		if m.key == key {
			return m
		}
	}
	return nil
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
		d.loseLease(id)
		back = append(back, t)
	}
	slices.SortFunc(back, func(a, b *task) int { return int(a.seq - b.seq) })
	d.stats.Resent += len(back)
	d.queue = append(back, d.queue...)
	m.sender.Close()
	delete(d.members, m.name)
	d.blocks.Leave(m.name)
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
			d.loseLease(id)
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
		l := d.tokens.Grant(t.id, m.name, m.key, now.Add(d.cfg.Lease))
		wt := wire.SurveyTask{ID: t.id, Lease: l.Token, Job: d.job, IP: t.ip, Ports: t.ports, Spec: spec}
		if d.job == wire.SurveyWeb {
			wt.Hosts = t.names()
		}
		if err := m.sender.Send(wire.KindSurveyTask, wt, sendTimeout); err != nil {
			d.log.Warn("survey task not sent; it waits", "supervisor", m.name, "task", t.id, "error", err)
			kept = append(kept, t)
			continue
		}
		m.tasks[t.id] = t
		d.flying[t.id] = t
		d.lease[t.id] = l
		d.deadl[t.id] = l.Deadline
		if len(m.tasks) == m.capacity {
			full++
		}
	}
	d.queue = kept
}

// route is the owner of ip's /24 (/48), as the crawl routes a domain:
// consistent hashing with bounded loads (cluster.Balancer), so a
// membership change moves only the blocks of the members that came or
// went, and no member holds much more than its capacity's share.
func (d *dispatch) route(ip string) *member {
	key := ip
	if a, err := netip.ParseAddr(ip); err == nil {
		key = block(a).String()
	}
	return d.members[d.blocks.Route(key)]
}

// loseLease ends the lease of flying task id without its answer: its
// holder may still answer it, late.
func (d *dispatch) loseLease(id string) {
	delete(d.lease, id)
	delete(d.flying, id)
	delete(d.deadl, id)
}

// result takes an answer from from, judged against the task's lease
// (cluster.Tokens.Judge): the holder's answer under its token is kept; a
// late answer to a lease its sender held and lost is kept too while the
// task waits in the queue (it spares the address a second round of
// probes), else only counted; anything else is forged and quarantines its
// sender.
func (d *dispatch) result(r *wire.SurveyResult, from wire.Peer) {
	now := time.Now()
	var t *task
	switch d.tokens.Judge(from, r.Supervisor, r.TaskID, r.Lease, d.lease[r.TaskID]) {
	case cluster.Forged:
		why := "it answered a task leased to no one"
		switch l := d.lease[r.TaskID]; {
		case l.Held() && l.Key != from.Key:
			why = "it answered a task leased to another member"
		case l.Held():
			why = "it answered under a lease token it was not given"
		}
		d.forged(from, r.Supervisor, why, now)
		return
	case cluster.Late:
		i := slices.IndexFunc(d.queue, func(q *task) bool { return q.id == r.TaskID })
		if i < 0 {
			d.stats.Late++
			return // sent again, or done already
		}
		t = d.queue[i]
		d.queue = slices.Delete(d.queue, i, i+1)
	default:
		t = d.flying[r.TaskID]
		delete(d.flying, r.TaskID)
		delete(d.lease, r.TaskID)
		delete(d.deadl, r.TaskID)
		for _, m := range d.members {
			delete(m.tasks, r.TaskID)
		}
	}
	if m := d.memberByKey(from.Key); m != nil {
		m.lastSeen = now
	} else if m := d.members[r.Supervisor]; m != nil && from.Key == "" {
		m.lastSeen = now
	}
	if r.Error != "" {
		t.attempts++
		d.log.Warn("survey task failed on a supervisor", "task", t.id, "ip", t.ip, "supervisor", r.Supervisor, "error", r.Error, "attempt", t.attempts)
		if t.attempts < maxAttempts {
			d.stats.Resent++
			d.queue = append(d.queue, t)
			return
		}
	}
	d.pendRows = append(d.pendRows, d.rows(t, r)...)
	d.pendDone = append(d.pendDone, t.id)
}
