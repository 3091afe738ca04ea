package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

func TestQuarantine(t *testing.T) {
	var logs bytes.Buffer
	q := NewQuarantine(slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Now()
	forger := wire.Peer{Key: "K", Address: "10.0.0.9"}
	if !q.Add(forger, "s1", "it answered a task leased to another member", now) {
		t.Fatal("a key first quarantined: not fresh")
	}
	for i := range 100 {
		if q.Add(forger, "s1", "again", now.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatal("a key quarantined again reported fresh")
		}
	}
	if !q.Has("K") || q.Has("") || q.Len() != 1 {
		t.Fatalf("Has(K) %v, Has(\"\") %v, Len %d", q.Has("K"), q.Has(""), q.Len())
	}
	if n := strings.Count(logs.String(), "member quarantined"); n != 1 {
		t.Errorf("logged %d times within a minute, want once:\n%s", n, logs.String())
	}
	q.Add(forger, "s1", "again", now.Add(2*quarantineLogEvery))
	if n := strings.Count(logs.String(), "member quarantined"); n != 2 {
		t.Errorf("logged %d times after the rate limit's minute, want twice", n)
	}
	l := q.List()
	if len(l) != 1 || l[0].Count != 102 || l[0].Why != "it answered a task leased to another member" || l[0].Address != "10.0.0.9" {
		t.Errorf("List %+v", l)
	}
	if !strings.Contains(logs.String(), "key=K address=10.0.0.9") {
		t.Errorf("the log lacks the key and address:\n%s", logs.String())
	}

	// A plaintext sender is logged, never quarantined.
	if q.Add(wire.Peer{Address: "127.0.0.1"}, "s2", "a token it was not given", now) || q.Len() != 1 {
		t.Error("a plaintext sender was quarantined")
	}
	if !strings.Contains(logs.String(), "plaintext cluster cannot tell who sent it") {
		t.Errorf("the plaintext refusal was not logged:\n%s", logs.String())
	}
	if q.Refused() != 103 {
		t.Errorf("refused %d, want 103", q.Refused())
	}

	if !q.Lift("K") || q.Has("K") || q.Lift("K") {
		t.Error("Lift: want the key out, once")
	}
}
