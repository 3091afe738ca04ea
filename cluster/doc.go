// Package cluster is the core the crawl's dispatcher and the survey's
// share to run their members: who may join (admission), what each member
// was given (leases) and whether an answer is taken (result intake). It
// trusts a member with the work leased to it and nothing else.
//
// Identity comes from the transport, never from a message: on a CURVE
// cluster a frame's sender is the public key the ZAP handler authenticated
// (wire.Peer.Key); the supervisor name a Hello or Result carries is a
// label for logs. A plaintext cluster (loopback, or insecure) cannot tell
// senders apart, and says so when it starts.
//
// Data flows one way. A dispatcher admits a Hello with Admission.Admit,
// which says how to dial the member's task socket and binds the member to
// its key. Each task it sends carries a Lease with a random Token
// (Grant). When an answer arrives, Intake.Judge compares it with the lease
// the dispatcher holds for the task now: Accept (the holder, under the
// current token), Late (an answer to a lease this same member held and
// lost: counted only) or Forged (anything else: the sender's key is put in
// Quarantine, which refuses its frames and gives it no work until an
// operator lifts it or the dispatcher restarts with its key authorized
// again). The dispatcher keeps the leases with its own tasks; the core
// keeps the ended leases (bounded) to tell late answers from forged ones.
//
// Nothing here is safe for concurrent use: each dispatcher calls it from
// the goroutine that owns its members.
package cluster
