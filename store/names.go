package store

import "backfill/resolver"

// Names is the crawl's DNS cache kept in the store (package resolver's
// Store): each name's answer, positive (addresses) or negative (no such
// name, no address), until it expires. Supervisors that share a store share
// it, so a name one of them asked is not asked again by another, nor by
// itself after a restart. Failures (time-outs, server failures) are never
// stored: they say nothing about the name.
//
// Entries are keyed by the name alone, lower case without the final dot, as
// resolver.Cache asks for them: every supervisor of a crawl asks the same
// questions of a name (A, then AAAA only without A), so one answer serves
// them all. A survey, which asks more of a name, keeps its answers in its
// own state instead.
//
// Load finds nothing for a name whose entry expired; a Save replaces the
// name's entry whatever it held, the later write winning.
type Names interface {
	Names() resolver.Store
}
