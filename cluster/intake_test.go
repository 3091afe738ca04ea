package cluster

import (
	"testing"
	"time"

	"backfill/wire"
)

func TestJudge(t *testing.T) {
	a, b := wire.Peer{Key: "A"}, wire.Peer{Key: "B"}
	in := NewIntake()
	now := time.Now()
	held := Grant("a", "A", now.Add(time.Minute))
	lostA := Grant("a", "A", now)
	in.Lost("t1", lostA)
	cases := []struct {
		name  string
		from  wire.Peer
		task  string
		token int64
		held  Lease
		want  Verdict
	}{
		{"the holder, its token", a, "t1", held.Token, held, Accept},
		{"another member, the holder's token", b, "t1", held.Token, held, Forged},
		{"the holder, a guessed token", a, "t1", held.Token + 1, held, Forged},
		{"a task leased to nobody", a, "t2", held.Token, Lease{}, Forged},
		{"the holder's lost lease", a, "t1", lostA.Token, held, Late},
		{"a lost lease, answered by another", b, "t1", lostA.Token, held, Forged},
		{"a lost lease's token on another task", a, "t2", lostA.Token, Lease{}, Forged},
		{"a zero token on a task leased to nobody", a, "t2", 0, Lease{}, Forged},
		{"plaintext: the token decides", wire.Peer{}, "t1", 7, Lease{Token: 7}, Accept},
	}
	for _, c := range cases {
		if got := in.Judge(c.from, c.task, c.token, c.held); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	in.Answered(lostA.Token)
	if got := in.Judge(a, "t1", lostA.Token, Lease{}); got != Forged {
		t.Errorf("a lost lease adopted, answered again: %v, want forged", got)
	}
}

func TestIntakeForgetsOldestLost(t *testing.T) {
	in := NewIntake()
	first := Grant("a", "A", time.Now())
	in.Lost("t0", first)
	for range lostCap {
		in.Lost("t", Grant("a", "A", time.Now()))
	}
	if len(in.lost) != lostCap {
		t.Fatalf("%d lost leases kept, want the bound %d", len(in.lost), lostCap)
	}
	if got := in.Judge(wire.Peer{Key: "A"}, "t0", first.Token, Lease{}); got != Forged {
		t.Errorf("the oldest lost lease, past the bound: %v, want forged", got)
	}
}

func TestTokensDiffer(t *testing.T) {
	seen := make(map[int64]bool)
	for range 10000 {
		tok := NewToken()
		if tok == 0 || seen[tok] {
			t.Fatalf("token %d repeated or zero", tok)
		}
		seen[tok] = true
	}
}
