// Package cluster is the core the crawl's dispatcher and the survey's
// share to run their members: who may join (admission) and who is a
// member (the member table), what each member was given (leases) and
// whether an answer is taken (result intake). It trusts a member with the
// work leased to it and nothing else.
//
// Identity comes from the transport, never from a message: on a CURVE
// cluster a frame's sender is the public key the ZAP handler authenticated
// (wire.Peer.Key), and its name is the one the authorized keys give that
// key (Admission.Names, from the provisioning inventory's NAME.pub files),
// else one made from the key (KeyName); the supervisor name a Hello or
// Result carries is a label for logs, cut to MaxLabel (Label). A
// plaintext cluster (loopback, or insecure) cannot tell senders apart: a
// member is the name it says, and it says so when it starts.
//
// Data flows one way. Members, one per dispatcher, takes each Hello and
// Heartbeat (Register): it checks the dispatcher's own conditions
// (Hooks.Check: the mapping digest, survey support), admits by
// Admission.Admit, which says how to dial the member's task socket and
// binds the member to its key, and keeps the member under its key's name;
// the dispatcher's Hooks dial and welcome a member that joins (Join) and
// hand back what one that leaves held (Leave: restarted, silent or
// quarantined). What it refuses goes to Refusals, a bounded table logged
// once per sender and reason and then once a minute, whatever the sender
// puts in its frames. Each task it sends carries a Lease whose token (Tokens.Grant)
// is an HMAC, under a secret the dispatcher keeps, of the task, the
// holder's key and the dispatcher process's generation: unpredictable to
// the members, yet recognizable by a later process on the same state.
// When an answer arrives, Tokens.Judge compares it with the lease the
// dispatcher holds for the task now: Accept (the holder, under the
// current token), Late (an answer to a lease this same key held, in this
// process or an earlier one, and lost: counted, or adopted by a dispatcher
// whose task still waits) or Forged (anything else: the sender's key is
// put in Quarantine, which refuses its frames and gives it no work until
// the dispatcher restarts with its key authorized again). Balancer routes
// the crawl's domains and the survey's address blocks to members (and
// Other names the member that would own a domain were some gone: the
// crawl's re-checks go to it). The dispatchers keep their leases with
// their own tasks. Package clustertest is a member for their tests.
//
// Nothing here is safe for concurrent use: each dispatcher calls it from
// the goroutine that owns its members.
package cluster
