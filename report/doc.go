// Package report writes a crawl's run report: one self-contained HTML
// file, its charts inline SVG drawn from plain templates (no script, no
// style sheet or font from elsewhere), so it opens offline and can be
// mailed or archived as it is.
//
// Gather reads what the report shows from the places a crawl leaves:
// the results store (the records and their found values with provenance:
// fill rate per field and per mapping, provenance samples), the crawl
// state's record targets (what each record lacked and the crawl set out
// to fill: the fill rates' denominators, dispatcher.ReadTargets), the
// dispatcher's status file (the records complete, partial and untouched,
// and the digest of the run's mappings, which mappings given must match)
// and its history file (dispatcher.History: records complete and pages
// per second over time, failures by class, the hosts failing most,
// robots.txt outcomes, and the supervisors' per-host request paces for
// the politeness table: requests per host, the busiest minute, and the
// shortest gap between two requests next to the delay the host was owed).
// The latest run of each host survey in the same state directory, if
// any, adds its outcomes by class and its top Server products (web) or
// port states and open ports (ports), from survey.Latest. Write renders
// the Data.
//
// Numbers carry data-* attributes (data-field, data-filled, …) so tests
// can read them back.
package report
