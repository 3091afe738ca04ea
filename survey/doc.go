// Package survey owns the host surveys that run on a crawl's cluster:
// survey web (the web-server metadata of many domains, the gTLD scanner
// of seeds/001) and survey ports (the TCP liveness of ports of many
// addresses, the port crawler of seeds/000). docs/survey.md is the user's
// guide and the row schemas.
//
// # Data flow
//
// RunWeb and RunPorts are the dispatcher side. They open the state
// (STATE-DIR/survey.db, state.go), resume the job's unfinished run or
// start a new one, and plan it once:
//
//	web:   domains file ─► package resolver (the crawl's), through a cache kept
//	       in the state's dns table (web.go, resolveAll)
//	       ─► unresolved rows, rows copied from the previous run (rescans),
//	          and one task per address with its domains, ordered by name server
//	ports: targets (IPs, CIDRs, names) or the Random draw (random.go)
//	       ─► excluded rows for the blocklisted, one task per address with the ports
//
// A run's tasks and early rows are written in one transaction. dispatch.go
// then speaks wire to the supervisors, as the crawl's dispatcher does:
// Hello/Heartbeat in, Welcome and SurveyTasks out, SurveyResults in. Each
// /24 (/48) goes to one supervisor (rendezvous hashing), each task is
// leased until its result is committed with its rows (one transaction),
// the lease renewed by every heartbeat that lists the task as held (so a
// lease runs out for a task its supervisor lost, never for one that is
// only long), and silent supervisors' tasks go to the others. Committed
// rows go to the output (output.go: JSON Lines or CSV) and, by a
// background loop, to the results store (store.Surveys). The summary
// (summary.go) is counted from the run's rows.
//
// The supervisor side is Prober (prober.go), which cmd/backfill gives
// every supervisor as its Config.Prober: one task of an address at a
// time, the task's delay between its connections, a cap on connections
// into a /24 and a rate (pace.go); TCP connects and banners
// (probe_ports.go) and HEAD / with a ranged-GET fallback, same-host
// redirects, TLS and certificate details (probe_web.go), every connection
// through package fetch's address guard.
//
// One-machine surveys are the same code: the command starts supervisors
// in its own process, on loopback, when the dispatcher listens.
//
// Package surveytest is the loopback zone the tests and benchmarks use.
package survey
