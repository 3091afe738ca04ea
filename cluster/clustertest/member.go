// Package clustertest is a cluster member for the tests of the
// dispatchers that run members, the crawl's and the survey's: it says
// Hello and Heartbeat over real ZeroMQ sockets (plaintext, or CURVE with
// a key pair of its own), and keeps what its dispatcher sends it
// (Welcome, Renew, tasks, Bye). What it does with a task is its test's:
// a crawl test answers Results, a survey test SurveyResults, a forger
// answers what it was not given.
package clustertest

import (
	"errors"
	"testing"
	"time"

	"backfill/wire"
)

// BeatEvery is how often Poll heartbeats once welcomed.
const BeatEvery = 50 * time.Millisecond

// Member plays one member. Tests set Hello's fields before joining, and
// read what arrived.
type Member struct {
	T     testing.TB
	Hello wire.Hello
	In    *wire.Receiver // its task socket
	Out   *wire.Sender   // to the dispatcher's intake

	Welcomed bool
	Welcome  wire.Welcome // the latest
	Renewed  int          // Renews received
	Byes     int          // Byes received
	// Silent stops the heartbeats Poll sends.
	Silent   bool
	LastBeat time.Time

	// OnTask and OnSurvey take the tasks that arrive (nil: dropped).
	// Beat adds to each heartbeat what the member holds.
	OnTask   func(wire.Task)
	OnSurvey func(wire.SurveyTask)
	Beat     func(*wire.Heartbeat)
}

// New is a member named name of capacity, talking to the dispatcher's
// intake at dispatcher: plaintext when keys is zero, else over CURVE with
// keys, its task socket hearing only dispKey. Its sockets close when the
// test ends.
func New(t testing.TB, name, dispatcher string, capacity int, keys wire.Keys, dispKey string) *Member {
	t.Helper()
	var in *wire.Receiver
	var out *wire.Sender
	var err error
	if keys.IsZero() {
		in, err = wire.Listen("tcp://127.0.0.1:*")
	} else {
		in, err = wire.ListenSecure("tcp://127.0.0.1:*", wire.Security{Keys: keys, Authorized: []string{dispKey}})
	}
	if err != nil {
		t.Fatal(err)
	}
	if keys.IsZero() {
		out, err = wire.Dial(dispatcher)
	} else {
		out, err = wire.DialSecure(dispatcher, wire.Security{Keys: keys, ServerKey: dispKey})
	}
	if err != nil {
		in.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out.Close()
		in.Close()
	})
	return &Member{T: t, In: in, Out: out, Hello: wire.Hello{
		Supervisor: name, Endpoint: in.Endpoint(), Capacity: capacity, Key: keys.Public, Started: time.Now().UTC(),
	}}
}

// Send sends one frame to the dispatcher; a full queue (a dispatcher
// that stopped reading) is not an error.
func (m *Member) Send(kind wire.Kind, v any) {
	m.T.Helper()
	if err := m.Out.Send(kind, v, time.Second); err != nil && !errors.Is(err, wire.ErrTimeout) {
		m.T.Fatal(err)
	}
}

// Join says Hello until a Welcome arrives: false if none within d.
func (m *Member) Join(d time.Duration) bool {
	m.T.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		m.Hello.Seq++
		m.Send(wire.KindHello, m.Hello)
		m.Receive(100 * time.Millisecond)
		if m.Welcomed {
			m.LastBeat = time.Now()
			return true
		}
	}
	return false
}

// Heartbeat sends one Heartbeat: Hello, what Beat adds, and now.
func (m *Member) Heartbeat() {
	m.T.Helper()
	m.LastBeat = time.Now()
	m.Hello.Seq++
	hb := wire.Heartbeat{Hello: m.Hello, At: m.LastBeat}
	if m.Beat != nil {
		m.Beat(&hb)
	}
	m.Send(wire.KindHeartbeat, hb)
}

// Poll heartbeats when one is due (welcomed, not Silent, BeatEvery since
// the last), then receives (see Receive).
func (m *Member) Poll(wait time.Duration) {
	m.T.Helper()
	if !m.Silent && m.Welcomed && time.Since(m.LastBeat) > BeatEvery {
		m.Heartbeat()
	}
	m.Receive(wait)
}

// Receive takes the frames that arrive within wait, and any right behind
// them.
func (m *Member) Receive(wait time.Duration) {
	m.T.Helper()
	for {
		kind, v, err := m.In.Recv(wait)
		if errors.Is(err, wire.ErrTimeout) {
			return
		}
		if err != nil {
			m.T.Fatal(err)
		}
		wait = 5 * time.Millisecond
		switch kind {
		case wire.KindWelcome:
			m.Welcomed, m.Welcome = true, *v.(*wire.Welcome)
		case wire.KindRenew:
			m.Renewed++
		case wire.KindBye:
			m.Byes++
		case wire.KindTask:
			if m.OnTask != nil {
				m.OnTask(*v.(*wire.Task))
			}
		case wire.KindSurveyTask:
			if m.OnSurvey != nil {
				m.OnSurvey(*v.(*wire.SurveyTask))
			}
		}
	}
}
