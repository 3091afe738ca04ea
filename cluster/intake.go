package cluster

import "backfill/wire"

// Verdict is what Judge makes of an answer.
type Verdict int

const (
	// Accept: the answer comes from the member holding the task's lease
	// now, under that lease's token.
	Accept Verdict = iota
	// Late: an answer to a lease its sender held, in this process or an
	// earlier one, and no longer holds (it expired, the member was
	// dropped and came back, the task was answered by another): normal
	// after a partition or a restart, counted only (or adopted, by a
	// dispatcher whose task still waits).
	Late
	// Forged: anything else: a task leased to another member or to
	// nobody it was ever leased to, a token never given to the sender.
	// Its sender is quarantined.
	Forged
)

func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Late:
		return "late"
	}
	return "forged"
}

// Answers reports whether an answer from from under token is the answer
// to lease l: l is held, by from's key, under token. In a plaintext
// cluster every key is "": the token alone decides.
func (l Lease) Answers(from wire.Peer, token int64) bool {
	return l.Held() && l.Token == token && l.Key == from.Key
}

// Judge decides an answer to task under token from from, which names
// itself member (a label, but in a plaintext cluster the only holder
// there is), given held, the lease the dispatcher holds for the task now
// (the zero Lease when it holds none).
func (k Tokens) Judge(from wire.Peer, member, task string, token int64, held Lease) Verdict {
	if held.Answers(from, token) {
		return Accept
	}
	holder := Holder(from.Key, member)
	if k.Made(task, holder, token) || k.Earlier(task, holder, token) {
		return Late
	}
	return Forged
}
