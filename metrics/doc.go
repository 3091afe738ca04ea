// Package metrics owns a process's Prometheus registry and the HTTP
// listener that serves it, with the rules for where that listener may
// listen.
//
// Every long-running backfill process (run, dispatcher, supervisor) makes
// one Registry with NewRegistry: the Go runtime and process collectors and
// the process's ZeroMQ traffic (wire.Traffic) are in it from the start.
// The dispatcher and each supervisor add their own collectors
// (dispatcher.Dispatcher.Collector, supervisor.Supervisor.Collector),
// which read the counters those packages keep anyway when Prometheus
// scrapes, so a crawl pays nothing for metrics between scrapes; only the
// latency histograms are observed as the crawl goes. A supervisor's
// collector is registered through Labeled, so a process running several
// tells them apart by a "supervisor" label.
//
// Listen opens the HTTP listener (off unless an address is given) and
// Server.Serve serves /metrics there, and whatever else the process mounts
// (the dispatcher's status page). The address rules keep what the metrics
// reveal (hosts crawled, error messages) off the internet by default: a
// bare port binds loopback, a wildcard or public address is refused in
// plaintext unless the user says Insecure (or gives a TLS certificate);
// private and loopback addresses are served in plaintext.
//
// Names follow Prometheus conventions: a backfill_ prefix, _total for
// counters, base units (_seconds, _bytes), and labels of bounded sets
// only (failure classes, status classes, roles, field names from the
// mappings), never a URL or a host.
package metrics
