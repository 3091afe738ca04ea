package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// Lease is what a member was given for one task: the member (its name, for
// logs, and its key, which is what counts), the token its answer must
// carry, and when the lease runs out.
type Lease struct {
	Token    int64  // never 0; carried on the wire as the task's Lease
	Member   string // the member's name (a label)
	Key      string // the member's authenticated key; "" in a plaintext cluster
	Deadline time.Time
}

// Held reports whether l is a lease (the zero Lease is none).
func (l Lease) Held() bool { return l.Token != 0 }

// Tokens makes the lease tokens of one dispatcher process. A token is the
// first 64 bits of an HMAC-SHA256, under a secret the dispatcher keeps in
// its state, of the task, its holder (the member's key; its name in a
// plaintext cluster) and the process's generation. Without the secret a
// token for a task one was not given is a guess with a 2⁻⁶⁴ chance, as a
// random one would be; with it, a dispatcher restarted on the same state
// can tell an answer its predecessor leased to a member from a forged one
// without having written the lease anywhere (Earlier), so an answer sent
// across a restart is still taken rather than the page fetched again.
//
// Leases of one task to one holder within one process share a token: an
// answer to an expired lease from the member that holds the task again is
// as good as the answer to the new one.
type Tokens struct {
	secret []byte
	gen    int64
}

// earlierGens is how many processes back Earlier recognizes tokens.
const earlierGens = 4

// NewSecret returns a fresh 128-bit secret for NewTokens, as two integers
// (what a state's meta table holds).
func NewSecret() [2]int64 {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return [2]int64{int64(binary.BigEndian.Uint64(b[:8])), int64(binary.BigEndian.Uint64(b[8:]))}
}

// NewTokens returns the token maker of the process of generation gen under
// secret (NewSecret).
func NewTokens(secret [2]int64, gen int64) Tokens {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b[:8], uint64(secret[0]))
	binary.BigEndian.PutUint64(b[8:], uint64(secret[1]))
	return Tokens{secret: b, gen: gen}
}

// Holder is who a lease is bound to: the member's authenticated key, or in
// a plaintext cluster (no key) its name.
func Holder(key, member string) string {
	if key != "" {
		return "key:" + key
	}
	return "name:" + member
}

// token is the token of task for holder in the process of generation gen.
func (k Tokens) token(task, holder string, gen int64) int64 {
	m := hmac.New(sha256.New, k.secret)
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], uint64(gen))
	m.Write(g[:])
	m.Write([]byte(task))
	m.Write([]byte{0})
	m.Write([]byte(holder))
	t := int64(binary.BigEndian.Uint64(m.Sum(nil)[:8]))
	if t == 0 {
		t = 1 // 0 is "no lease"
	}
	return t
}

// Grant makes a lease of task for the member named member with key,
// running until deadline.
func (k Tokens) Grant(task, member, key string, deadline time.Time) Lease {
	return Lease{Token: k.token(task, Holder(key, member), k.gen), Member: member, Key: key, Deadline: deadline}
}

// Made reports whether token is one this process made for task and holder.
func (k Tokens) Made(task, holder string, token int64) bool {
	return token != 0 && token == k.token(task, holder, k.gen)
}

// Earlier reports whether token is one of the earlierGens processes before
// this one made for task and holder: an answer to a lease of an earlier
// dispatcher process.
func (k Tokens) Earlier(task, holder string, token int64) bool {
	if token == 0 || len(k.secret) == 0 {
		return false
	}
	for g := k.gen - 1; g >= max(k.gen-earlierGens, 0); g-- {
		if token == k.token(task, holder, g) {
			return true
		}
	}
	return false
}
