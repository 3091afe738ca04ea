// Package resolver owns name resolution for the crawl and the survey: the
// DNS queries themselves (miekg/dns, UDP with TCP on truncation), how many
// of them are in flight, and what their answers are remembered for.
//
// Data flows in two layers:
//
//	Cache.Lookup(name) ─► hosts file ─► memory ─► Store (SQLite: the state dir or the survey's state;
//	        │                                          or the store supervisors share, package store)
//	        │ miss (one look-up per name, however many callers wait)
//	        ▼
//	Resolver.Lookup ─► limiter of the server (window + pace, adaptive) ─► UDP/TCP query
//
// A Resolver asks one or more servers. Each server has a limiter: at most
// Config.MaxInFlight queries at once, fewer after time-outs (the window
// halves, as a congestion window does, and the pace of new queries drops to
// what the server was seen to answer), growing back with answers
// (limit.go). A cut that does not lower the share of queries lost is
// undone: that loss is the path's, random, and later time-outs are
// congestion only above it (loss.go). A query that times out is sent
// again, to the next server, at most Config.Attempts times in all (on a
// lossy path as many as make losing all of them unlikely, up to 20): the
// first tries wait a retransmission time-out from the round trips seen
// (RFC 6298, at least 200 ms, doubled each time; on a lossy path whose
// server goes on answering, at least 100 ms and not doubled), the last the
// whole Config.Timeout; then the name fails with ClassTimeout, which
// callers treat as transient, unlike ClassNXDomain.
//
// A Cache keeps answers: addresses for their TTL within [Min, Max], a name
// that does not exist (or has no address) for the negative TTL of its zone's
// SOA within the same bounds (Negative when the SOA says nothing), and a
// server failure or time-out for Failure only, doubled for each further
// failure of the name in a row up to MaxFailure, in memory (a rerun asks
// again). Positive and negative answers go to the Store too, so a
// restarted process asks nothing it already knew, nor, when the Store is
// shared, does any other. Store is
// an interface so that the store package (the results store a cluster
// shares) can keep answers without this package knowing it; SQLStore is
// the file of one machine. Concurrent look-ups of one name share one query.
//
// The common calls:
//
//	r, err := resolver.New(resolver.Config{Servers: []string{"127.0.0.1:53"}})
//	st, err := resolver.OpenStore(ctx, stateDir) // STATE-DIR/dns.db
//	c := resolver.NewCache(r, resolver.CacheConfig{Store: st})
//	addrs, err := c.Addrs(ctx, "example.org") // *Error with a Class when none
//
// Resolver and Cache are safe for concurrent use. Stats reads their
// counters for summaries, status and metrics.
package resolver
