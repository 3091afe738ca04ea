package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// fakeMember is a dispatcher's member type, for the table's tests.
type fakeMember struct {
	Member
	left string // why it left
}

// newTable is a member table whose hooks record what happened.
func newTable(admit Admission, log *slog.Logger) (*Members[*fakeMember], *[]*fakeMember) {
	var gone []*fakeMember
	ms := NewMembers(admit, log, Hooks[*fakeMember]{
		Join: func(c Member) (*fakeMember, error) { return &fakeMember{Member: c}, nil },
		Leave: func(m *fakeMember, reason string) (int, error) {
			m.left = reason
			gone = append(gone, m)
			return 0, nil
		},
	})
	return ms, &gone
}

// TestMembersAreTheirKeys: on a secured cluster a member is its key, named
// by the authorized keys or after the key; a Hello under another
// member's name, sent first, is a label of its sender's own member: the
// named member still joins as itself, and a forgery quarantines the
// sender's key alone.
func TestMembersAreTheirKeys(t *testing.T) {
	honest, squatter, unnamed := wire.Peer{Key: "KEY-HONEST", Address: "10.0.0.1"}, wire.Peer{Key: "KEY-SQUAT", Address: "10.0.0.9"},
		wire.Peer{Key: "KEY-UNNAMED", Address: "10.0.0.3"}
	admit := Admission{Keys: wire.Keys{Public: "D", Secret: "d"}, Authorized: []string{honest.Key, squatter.Key, unnamed.Key},
		Names: map[string]string{honest.Key: "honest", squatter.Key: "crawler-9"}}
	var logs bytes.Buffer
	ms, gone := newTable(admit, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Now()
	hello := func(name string, from wire.Peer) wire.Hello {
		return wire.Hello{Supervisor: name, Endpoint: "tcp://" + from.Address + ":5560", Key: from.Key, Capacity: 4, Started: now}
	}
	m, ev, err := ms.Register(hello("honest", squatter), squatter, now)
	if ev != Joined || err != nil || m.ID != "crawler-9" || m.Label != "honest" {
		t.Fatalf("the squatter: %v %v, member %+v; want it joined as crawler-9, labelled honest", ev, err, m)
	}
	h, ev, _ := ms.Register(hello("honest", honest), honest, now)
	if ev != Joined || h.ID != "honest" {
		t.Fatalf("the honest member: %v as %q, want it joined as honest", ev, h.ID)
	}
	if u, ev, _ := ms.Register(hello("honest", unnamed), unnamed, now); ev != Joined || u.ID != KeyName(unnamed.Key) {
		t.Fatalf("an unnamed key: %v as %q, want it named %s", ev, u.ID, KeyName(unnamed.Key))
	}
	if _, ev, _ := ms.Register(hello("honest", honest), honest, now.Add(time.Second)); ev != Seen {
		t.Errorf("the honest member heard again: %v, want Seen", ev)
	}
	if !strings.Contains(logs.String(), `msg="supervisor joined" supervisor=crawler-9`) || !strings.Contains(logs.String(), "says=honest") {
		t.Errorf("the squatter's join is not logged under its own name, with what it says:\n%s", logs.String())
	}

	// The squatter forges: its key alone is quarantined, and it leaves.
	if fresh, err := ms.Forged(squatter, "honest", "it answered a task leased to another member", now); !fresh || err != nil {
		t.Fatalf("Forged: %v, %v", fresh, err)
	}
	if !ms.Quarantined(squatter) || ms.Quarantined(honest) {
		t.Error("want the squatter's key quarantined, the honest one's not")
	}
	if q := ms.Quarantine().List(); len(q) != 1 || q[0].Member != "crawler-9" {
		t.Errorf("quarantined %+v, want crawler-9 alone", q)
	}
	if len(*gone) != 1 || (*gone)[0].ID != "crawler-9" || (*gone)[0].left != LeaveQuarantined {
		t.Errorf("left: %+v, want the squatter, quarantined", *gone)
	}
	if _, ok := ms.Get("honest"); !ok || ms.Len() != 2 {
		t.Errorf("members %v, want honest and the unnamed key's", ms.All())
	}

	// A new process of a member (another Started) takes its place.
	h2 := hello("renamed", honest)
	h2.Started = now.Add(time.Minute)
	if m, ev, _ := ms.Register(h2, honest, now); ev != Joined || m.ID != "honest" || (*gone)[1].left != LeaveRestarted {
		t.Errorf("restarted: %v as %q, left %+v", ev, m.ID, *gone)
	}
	// Silent members go.
	if err := ms.Expire(now.Add(time.Hour), time.Minute); err != nil || ms.Len() != 0 {
		t.Errorf("after Expire: %d members, %v", ms.Len(), err)
	}
}

// TestMembersPlaintext: a plaintext cluster cannot tell senders apart: a
// member is the name it says, cut to MaxLabel.
func TestMembersPlaintext(t *testing.T) {
	ms, _ := newTable(Admission{}, nil)
	now := time.Now()
	long := strings.Repeat("s", 10<<10)
	m, ev, _ := ms.Register(wire.Hello{Supervisor: long, Endpoint: "tcp://127.0.0.1:5560", Started: now}, wire.Peer{Address: "127.0.0.1"}, now)
	if ev != Joined || len(m.ID) > MaxLabel+len("…+99999 bytes") || m.ID != Label(long) {
		t.Fatalf("%v as %d bytes %q", ev, len(m.ID), m.ID)
	}
	if got, ok := ms.Of(wire.Peer{}, long); !ok || got != m {
		t.Error("Of: the member of a name not found")
	}
}

// TestRefusalsBounded: refusals are kept one entry per sender and
// category, a bounded number, and logged once, then once a minute, with
// names and reasons cut: 10,000 refused Hellos of a megabyte of name
// each make a few lines and no more entries than the bound.
func TestRefusalsBounded(t *testing.T) {
	var logs bytes.Buffer
	ms, _ := newTable(Admission{}, slog.New(slog.NewTextHandler(&logs, nil)))
	ms.hooks.Check = func(h wire.Hello) (string, string) { return RefusedMappings, "its mappings differ" }
	now := time.Now()
	name := strings.Repeat("n", 1<<20)
	from := wire.Peer{Address: "127.0.0.1"}
	for i := range 10000 {
		at := now.Add(time.Duration(i) * 10 * time.Millisecond) // 100 s in all
		if _, ev, _ := ms.Register(wire.Hello{Supervisor: name, Endpoint: "tcp://127.0.0.1:1"}, from, at); ev != Refused {
			t.Fatalf("hello %d: %v, want Refused", i, ev)
		}
	}
	if n := strings.Count(logs.String(), "supervisor refused"); n != 2 {
		t.Errorf("logged %d times over 100 s, want twice (once, then after a minute)", n)
	}
	if logs.Len() > 4<<10 {
		t.Errorf("%d bytes of log for one sender's refusals", logs.Len())
	}
	l := ms.Refusals().List()
	if len(l) != 1 || l[0].Count != 10000 || len(l[0].Member) > 2*MaxLabel || ms.Refusals().Count(RefusedMappings) != 10000 {
		t.Errorf("refusals %d entries, first %+v", len(l), l[0].Count)
	}
	// Many senders: the table keeps the latest maxRefusedKept.
	for i := range 1000 {
		ms.Register(wire.Hello{Supervisor: "x", Endpoint: "tcp://127.0.0.1:1"}, wire.Peer{Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, now)
	}
	if n := len(ms.Refusals().List()); n != maxRefusedKept {
		t.Errorf("%d senders kept, want %d", n, maxRefusedKept)
	}
}

func TestLabel(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"crawler-1", "crawler-1"},
		{"tab\there", "tab?here"},
		{"bad\xffbyte", "bad?byte"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "…+16 bytes"},
	} {
		if got := Label(c.in); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if KeyName("k") != KeyName("k") || KeyName("k") == KeyName("l") || !strings.HasPrefix(KeyName("k"), "key-") {
		t.Error("KeyName is not a stable name of the key")
	}
}
