package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// Lease is what a member was given for one task: the member (its name, for
// logs, and its key, which is what counts), the token its answer must
// carry, and when the lease runs out.
type Lease struct {
	Token    int64  // random, never 0; carried on the wire as the task's Lease
	Member   string // the member's name (a label)
	Key      string // the member's authenticated key; "" in a plaintext cluster
	Deadline time.Time
}

// Held reports whether l is a lease (the zero Lease is none).
func (l Lease) Held() bool { return l.Token != 0 }

// Grant makes a lease for the member named member with key, running until
// deadline, under a fresh token.
func Grant(member, key string, deadline time.Time) Lease {
	return Lease{Token: NewToken(), Member: member, Key: key, Deadline: deadline}
}

// NewToken returns 64 random bits, never 0 (0 is "no lease"). A member
// learns a token only with its task, so a token for a task it was not
// given is a guess with a 2⁻⁶⁴ chance.
func NewToken() int64 {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand)
		if t := int64(binary.BigEndian.Uint64(b[:])); t != 0 {
			return t
		}
	}
}
