package cluster

import "backfill/wire"

// Verdict is what Judge makes of an answer.
type Verdict int

const (
	// Accept: the answer comes from the member holding the task's lease
	// now, under that lease's token.
	Accept Verdict = iota
	// Late: an answer to a lease the same member held and lost (expired,
	// or the member was dropped and came back): normal after a partition
	// or a restart, counted only.
	Late
	// Forged: anything else: a task leased to another member or to
	// nobody, a token never given to the sender, an answer repeated.
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

// lostCap bounds the lost leases an Intake remembers. Leases are lost
// only when they expire or their member is dropped, so this spans far more
// than a partition's worth of them; an answer to a lease forgotten by then
// is judged Forged.
const lostCap = 1 << 18

// lost is a lease that ended without its answer.
type lost struct {
	task string
	key  string
}

// Intake judges answers against the leases they name. It remembers the
// leases that were lost, to tell a member's late answers from forged
// ones; an answered lease is forgotten, so its answer sent again is
// Forged.
type Intake struct {
	lost  map[int64]lost // by token
	order []int64        // tokens of lost, oldest first, for the bound
	head  int
}

// NewIntake returns an Intake that remembers no lease.
func NewIntake() *Intake { return &Intake{lost: make(map[int64]lost)} }

// Answers reports whether an answer from from under token is the answer
// to lease l: l is held, by from's key, under token. In a plaintext
// cluster every key is "": the token alone decides.
func (l Lease) Answers(from wire.Peer, token int64) bool {
	return l.Held() && l.Token == token && l.Key == from.Key
}

// Judge decides an answer to task under token from from, given held, the
// lease the dispatcher holds for the task now (the zero Lease when it
// holds none).
func (in *Intake) Judge(from wire.Peer, task string, token int64, held Lease) Verdict {
	if held.Answers(from, token) {
		return Accept
	}
	if l, ok := in.lost[token]; ok && l.task == task && l.key == from.Key {
		return Late
	}
	return Forged
}

// Lost records that lease l of task ended without an answer: its holder
// may still answer it, late.
func (in *Intake) Lost(task string, l Lease) {
	if !l.Held() {
		return
	}
	if _, ok := in.lost[l.Token]; ok {
		return
	}
	if len(in.order) < lostCap {
		in.order = append(in.order, l.Token)
	} else {
		delete(in.lost, in.order[in.head])
		in.order[in.head] = l.Token
		in.head = (in.head + 1) % lostCap
	}
	in.lost[l.Token] = lost{task: task, key: l.Key}
}

// Answered forgets a lost lease whose late answer was taken after all
// (an adoption): answering it again is Forged.
func (in *Intake) Answered(token int64) { delete(in.lost, token) }
