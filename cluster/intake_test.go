package cluster

import (
	"testing"
	"time"

	"backfill/wire"
)

func TestJudge(t *testing.T) {
	a, b := wire.Peer{Key: "A"}, wire.Peer{Key: "B"}
	secret := NewSecret()
	before, now := NewTokens(secret, 6), NewTokens(secret, 7)
	deadline := time.Now().Add(time.Minute)
	held := now.Grant("t1", "a", "A", deadline)
	old := before.Grant("t1", "a", "A", deadline)
	other := NewTokens(NewSecret(), 7).Grant("t1", "a", "A", deadline) // another state's
	plain := now.Grant("t1", "p", "", deadline)
	cases := []struct {
		name   string
		from   wire.Peer
		member string
		task   string
		token  int64
		held   Lease
		want   Verdict
	}{
		{"the holder, its token", a, "a", "t1", held.Token, held, Accept},
		{"another member, the holder's token", b, "b", "t1", held.Token, held, Forged},
		{"another member naming the holder", b, "a", "t1", held.Token, held, Forged},
		{"the holder, a guessed token", a, "a", "t1", held.Token + 1, held, Forged},
		{"its token of one task on another", a, "a", "t2", held.Token, Lease{}, Forged},
		{"the holder, after the task went to another", a, "a", "t1", held.Token, Lease{Token: 9, Key: "B"}, Late},
		{"an earlier process's lease, its holder", a, "a", "t1", old.Token, Lease{}, Late},
		{"an earlier process's lease, another", b, "b", "t1", old.Token, Lease{}, Forged},
		{"another state's token", a, "a", "t1", other.Token, Lease{}, Forged},
		{"a zero token", a, "a", "t1", 0, Lease{}, Forged},
		{"plaintext: the holder", wire.Peer{}, "p", "t1", plain.Token, plain, Accept},
		{"plaintext: another name, the holder's token", wire.Peer{}, "q", "t1", plain.Token, Lease{}, Forged},
	}
	for _, c := range cases {
		if got := now.Judge(c.from, c.member, c.task, c.token, c.held); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if !now.Earlier("t1", Holder("A", "a"), old.Token) || now.Earlier("t1", Holder("A", "a"), held.Token) {
		t.Error("Earlier: want the earlier process's token only")
	}
}

func TestTokensDiffer(t *testing.T) {
	k := NewTokens(NewSecret(), 1)
	seen := make(map[int64]bool)
	for i := range 10000 {
		tok := k.Grant(string(rune(i)), "m", "K", time.Time{}).Token
		if tok == 0 || seen[tok] {
			t.Fatalf("token %d repeated or zero", tok)
		}
		seen[tok] = true
	}
}
