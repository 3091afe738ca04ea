// Package dispatcher owns the crawl: the records being filled, the frontier
// of URLs to fetch, the seen-URL store with each page's cached extraction,
// the supervisors that do the fetching, and the leases that make sure every
// task is answered.
//
// # Data flow
//
// Load reads a records file (CSV with a header row, or JSON Lines). Each
// record gets an id (its id column, or its line number with Config.ID
// records.IDLine; a file without the column is refused), its fields and
// its links (every http(s) URL value, or a links column/list). Its targets
// are the fields to fill: Config.Fields, else every field the mappings can
// produce, minus the fields the record already has. The record goes to the
// store (PutRecords), which holds the one copy of it, with its text
// exactly as read (store.Record.Raw, what export gives back), and its
// crawl state to the state database, in batches of thousands a
// transaction (seeds.go); the records package reads the file, batch by
// batch, while Load writes. A malformed line (wrong columns, bad quoting
// or JSON, not UTF-8, an empty or duplicate id, over
// records.MaxRecordBytes, whose text is kept up to records.MaxKeptBytes) is
// reported as "file:line: reason" and kept in the store in its place,
// marked, never crawled for; Config.Strict refuses the file instead. A
// file that is not text, or holds no record, is refused. The state
// remembers how far each file was taken in: a resumed Load reads nothing
// again, and one a crash cut short reads on. A record's links enter the
// frontier at depth 0 when the frontier reaches the record, in record
// order, as the window drains. One Dispatcher at a time holds a state
// directory (statelock.go).
//
// Run then loops:
//
//	intake (PULL) ─► hellos/heartbeats ─► members (one PUSH Sender each)
//	              └► results ─► lease check ─► seen store (cached extraction)
//	                                         └► each attached record: attribution,
//	                                            merge, completion, links at depth+1
//	frontier window ─► host queues ─► routing by registrable domain ─► Task (leased)
//
// A goroutine reads and decodes intake frames; the Run loop takes every
// frame ready at once as one batch, and when that batch holds only a few
// results it waits a moment (gatherWait) for more to join it: results
// that arrive close together are applied together, however slowly the
// hosts answer, so latency costs the dispatcher waiting, not work. The
// reader holds meanwhile after its next frame and reads the rest when
// the gather ends (intakePause), so the process wakes once a batch, not
// once a result.
// Batches write into one SQLite transaction (WAL, synchronous=NORMAL),
// committed every second while results keep coming, when the intake goes
// quiet with no task out, and at the end, so throughput is bounded by the
// supervisors, not by commits; a commit that changed nothing writes
// nothing. An idle loop wakes only when something is due (a tick, a
// report, a commit, a host's pace). Decoded records stay cached across
// batches (a bounded number of them), and the records and hosts changed
// in a batch are written back without visiting the others.
//
// # The state
//
// state.db in Config.StateDir holds, in the lean schema of schema.go: the
// seen-URL store and frontier in one table (urls: per URL, keyed by 8
// bytes of its hash, first seen, last crawled, outcome class and status,
// failed fetches in a row, cached extraction, depth, priority, score
// level and state queued/done/dropped; the URL's text only while it may
// be sent again),
// links (which record reached which URL at which depth), the records'
// crawl state (id, line, own links, match-key values, target set, filled
// values with provenance, complete), the malformed input lines (their
// ids and places), the pages records refused and the records whose
// outcome the store holds, the hosts' budget counts, the load progress of
// each records file, and counters and the crawl's totals. A lease in
// progress lives in memory only. A seen filter (seenfilter.go) in front
// of urls answers most "is this URL new?" questions without a lookup. A
// new Dispatcher on the same directory resumes: tasks that were leased
// are queued again, done URLs are never fetched again, and loading the
// same records file again changes nothing, except that when Run begins,
// pages that failed in an earlier process for a reason that may pass (a
// host down, a 5xx) are queued again, a bounded number of times
// (retry.go). The schema is versioned by PRAGMA user_version (sqlitedb),
// and a state of an earlier build is converted when opened.
//
// Memory is bounded by configuration, not by the crawl's size: a window
// of tasks, caches of records and hosts, the seen filter (16 MiB), the
// balancers' assignments and the hand-over times are each capped, and
// everything per record, URL or host is on disk. docs/scale.md has the
// figures.
//
// Only a bounded window of queued tasks (windowCap) lives in memory, grouped
// by host and ordered: higher mapping priority first, then the higher
// score level (see Frontier order), then shallower, then round-robin over
// hosts (every host's first queued page, then every host's second, …),
// then first come first served. The rest stays in SQLite and is read back
// in that order as the window drains; a better task arriving at a full
// window takes the place of its last one. An index page brings all its
// host's links at once, so first come first served alone would fill the
// window with a few hosts' pages, and with a Crawl-delay the crawl would
// run at those few hosts' pace.
//
// # Frontier order
//
// Every link a record reaches is scored for it before it costs a request
// (score.go, with package linkscore): its cue says whether a mapping that
// runs on its URL declares a field the record lacks, how much of the
// record's match-key words its address or anchor text holds (the anchor
// text comes with the link from the supervisor, wire.Link.Text, and is
// kept with the page's cached extraction), what the page it was found on
// was to the record (its own link, a page that gave it values, one about
// someone else, or neither) and how many links that page had, whether it
// is at the depth limit, and whether its host has given nothing in
// barrenPages pages. The run's model (linkscore.Model) says what the link
// is expected to give (its value: the chance that its page gives the
// record a value, or leads to one), learned from the crawl's own pages:
// apply feeds each page's direct outcome back, and a trail of the links
// each record followed (their cues and the pages they came from, bounded
// by trailCap) credits the links that led to a value, or counts those
// whose links all came to nothing. A task is worth the sum of its
// records' values; its level (levelOf) orders the frontier and is kept
// in the state (urls.score). Each host's queue is so ordered; the
// per-host delay (pace.go), the in-flight limit and the round-robin across
// hosts are unchanged. Every rescoreEvery the window's tasks are scored
// again under what the model has learned.
//
// A link that cannot pay is pruned for its record, counted by reason in
// Summary.Pruned (the Prune* constants) and logged at debug level with
// its cue, as each link taken is with its value: at the depth limit, one
// whose page no mapping that runs on it could take a missing field from;
// one to a barren host that does not name the record; and one the model
// finds unlikely on enough evidence (a queued task whose every record
// finds it so leaves the frontier at the next rescoring). A link whose
// page is cached, queued or leased costs nothing and is always attached;
// a record's own links are never pruned. Summary.Requests counts the
// requests made for pages, and RequestsPerComplete divides them by the
// records completed. docs/frontier.md tells users how to read it.
//
// # Supervisors
//
// The protocol is in wire's messages: a Hello (or a Heartbeat from an
// unknown supervisor, or one whose Started changed) registers a supervisor
// whose mapping digest equals ours; the dispatcher dials its endpoint and
// answers Welcome. The member table is the cluster's (cluster.Members,
// members.go): on a secured cluster a supervisor is its key, named by
// Config.Names, and the name its Hello says is a label; what is refused
// (another digest, an unauthorized key, a frame that does not decode) is
// counted and logged once a sender and minute. Run dispatches nothing until the crawl's supervisors
// have joined: Config.Expect of them (or, after Config.ExpectTimeout,
// those that did), else those that said Hello before a short quiet spell
// (expect.go), so that domains are not all handed to the first one. With
// Config.Keys the intake hears only supervisors whose
// CURVE key is in Config.Authorized, and their task sockets are dialled with
// the key each Hello advertises, if authorized too; without keys every
// endpoint must be loopback unless Config.Insecure (security.go).
//
// Every task of one registrable domain goes to one supervisor, its owner
// by consistent hashing with bounded loads (cluster.Balancer): the
// first member clockwise from the domain's hash on a ring of virtual nodes
// that holds less than its capacity's share of the domains plus 2 %. One
// balancer covers all live members for plain tasks, one the
// render-capable members for render tasks (without any, those wait). One
// owner per domain is what keeps politeness across machines: two
// supervisors never crawl one site at once. Owners stick, which is what
// keeps membership changes cheap: a joining supervisor takes about 1/n of
// the domains, a leaving one hands over only the domains it owned, and
// every other domain keeps its owner, its queue and its hosts' crawl
// delays; the bound is what keeps the split even when there are only a
// few hundred domains. A
// host that moves waits until its old owner has answered every task of it
// it held, and its first tasks to the new owner carry the time the old one
// last answered (or was dropped): politeness moves with the host even
// between supervisors that share no cache. A
// supervisor never has more tasks in flight than its advertised capacity,
// and one host never more than Config.HostInFlight. A task is leased until
// its Result commits; an expired lease, a silent supervisor (three missed
// heartbeats) or a restarted one puts its tasks back in the queue. Each
// lease carries an unpredictable token bound to the task and its holder's
// key (cluster.Tokens, under a secret kept in the state), and a result is
// taken only from the key that holds the task's lease now, under its
// token. An answer to a lease its sender held and lost (expired, or of an
// earlier dispatcher process) is adopted while its task still waits, so
// the page is not fetched twice, and otherwise counted as late; anything
// else is forged and quarantines its sender. Redelivery never changes
// anything twice.
//
// A member may still lie about the pages it was given. A share of each
// member's value-giving answers (Config.RecheckShare) is fetched again by
// another member, under the host's politeness, and a third arbitrates when
// they disagree (recheck.go); a member the others contradict
// Config.RecheckStrikes times is quarantined and every answer it gave is
// taken back and fetched again (purge.go: the state keeps who answered
// each page, and every value the member that fetched it). Purge does the
// same for an operator.
//
// # Results and records
//
// A page's values go to a record only when every match key (a field marked
// match in its mapping) that the page yields agrees with what the record
// knows of it (its own value, or one filled from a page no farther away),
// compared after etl.MatchKey; a page yielding no value for a match key is
// accepted, because it does not contradict the record. A refused page
// gives the record no values (it describes someone else), but its links
// are followed for the record like any other page's, within the depth
// limit and the budgets, at the same priority: a colleague's profile, a
// team page or a co-author list is often the way to the record's own
// page. Such pages are counted in Summary.Disagreeing.
// When pages disagree on a field, the page nearer the record's own links
// wins, ties going to the smaller source URL, so the result does not depend
// on arrival order; the losing values are kept as conflicts. Only target
// fields are written (store.SetFields). A record whose targets are all
// filled is complete, and its queued tasks are dropped unless another
// incomplete record still wants them. A URL reached by a second record is
// not fetched again: its cached extraction is applied at once.
//
// A page is rendered in a browser when a mapping that matches it says
// "render": "always" (it is queued as a render task from the start), or
// when its HTML looks like a shell that JavaScript fills in (the
// supervisor's Result.JSOnly, from etl.JSOnly) and a record that wants it
// still lacks a field that a matching mapping whose render is auto
// declares and did not find there: then it is queued once more as a render
// task (the frontier's render flag remembers it, so never twice), if a
// render-capable supervisor is a member; without one its static result
// stands, counted in Summary.RenderWanted. Mappings that found nothing on
// a page say nothing by themselves: several mappings share a URL pattern
// when a site has several layouts, and on each page all but one find
// nothing (renderretry.go).
//
// # Links not followed
//
// Links pass the filters of filter.go before they enter the frontier, so a
// crawl never wanders into traps or spends itself on useless sites. A host
// on the user's blacklist (Config.Blacklist; subdomains included) is never
// queued, a record's own links included. Links found on pages are not
// followed into the top Config.ExcludeTop popular sites, when their path
// has more than MaxPathDepth segments or one segment more than MaxRepeats
// times, or when their host (HostBudget) or record (RecordBudget) has had
// its pages queued already; calendars and other endless query-string
// pages run into the host budget. A page whose links reach more than
// MaxFanout registrable domains, or more than MaxFanout hosts outside its
// own registrable domain, is a link farm: none of its links is followed.
// What was not followed is counted by reason in Summary.Filtered.
//
// A page whose text was seen before is not expanded either: supervisors
// send each page's fingerprint (a hash of its normalized text and a 64-bit
// simhash), and contentseen.go finds exact copies and near-duplicates
// (Hamming distance at most 3) through permuted tables, without scanning
// every fingerprint. Only a copy on the same host as the first page counts
// (URL variants, session ids, mirrors within a site): pages of one template
// on different sites read alike but link to different places. A
// duplicate's fields still go to its records; its links are not followed,
// and it is recorded as a duplicate of the first page in the state, whose
// fingerprints are reloaded on resume.
//
// # Outcomes
//
// A page whose values a record refuses is kept (the refusals table) and
// counted. When Run ends, outcomes.go works out, from what became of each
// incomplete record's pages, why its missing fields stayed missing (the
// Reason* constants: a refused page, pages without values or without a
// matching mapping, pages still queued, robots.txt, failures, no links),
// writes each record's store.Outcome for export, and counts them by reason
// in Summary.Reasons. A record a stopped run had not reached yet is
// counted (not-fetched, or no-links) and gets no outcome. With a debug logger every decision is logged per
// record. The counters of the summary and the status are the crawl's,
// across the dispatcher processes it took (totals.go).
//
// # Status
//
// While Run works it rewrites StatusFile in the state directory every
// StatusEvery, in one rename: the members with their capacity, tasks in
// flight, parked host queues and the counters and rate from their
// heartbeats; the members that left and why; the queue depths and the
// records complete. It writes a last one, finished or stopped, when Run
// returns. `backfill status` reads it (ReadStatus).
//
// The status, the progress reports and /metrics say how long the crawl
// will take (ETA, eta.go): at least the busiest host's requests left one
// per delay, and every request left at the rate the hosts with work and
// the supervisors' workers allow, naming what bounds it; and an estimate
// that adds the pages the pages left will lead to. The pages left are
// counted per host and depth as tasks are queued, taken in, answered and
// dropped (one entry per host with work, at most leftCap, the rest
// folded), and once from the state when a dispatcher resumes; the hosts'
// delays come from their results (pace.go), else the default delay the
// supervisors' Hello says (Config.DefaultDelay before any has).
//
// For operators the dispatcher also keeps a ledger (ledger.go): a
// timeline of the crawl's progress whose resolution halves as it fills,
// so it stays bounded and spans the whole crawl; the latest failures; the
// hosts failing most; and, from the supervisors' heartbeats, their
// robots.txt outcomes, hosts in back-off, and per-host request paces
// (requests, the busiest minute, the shortest gap between two requests
// and the delay owed then). Status (the method) serves it live with the
// status, for the status page; HistoryFile keeps it across restarts for
// the run report (ReadHistory), rewritten every historyEvery. Settled is
// a bounded feed of the records as they become complete, which
// followers (run --stream, export --follow) write out. Collector serves
// the counters to Prometheus when scraped (metrics.go).
//
// # Freshness
//
// With Config.RecrawlAfter, a page crawled longer ago than that (before
// this Dispatcher was made: one process fetches a page at most once) is
// queued again when a record reaches it, instead of having its cached
// extraction applied. The seen store keeps the ETag and Last-Modified of
// each page's last good fetch and the Task carries them; a supervisor's
// conditional request answered 304 comes back as a Result marked
// NotModified, which commits like a fetched page whose extraction is the
// cached one. With Config.Refresh, Run first re-checks every target value
// older than RecrawlAfter: the value is set aside (the prior table), its
// record becomes incomplete, and the record's own links and the value's
// source are revisited. A value found again unchanged gets a new At; one
// that changed replaces the old, which goes to store.Value.History; when
// the crawl ends with nothing found, the old value is put back. The
// user's input values are never targets, so never touched. See
// refresh.go.
//
// # Mappings changed
//
// The state keeps the digest of the mappings each Run began with. A Run
// that begins with other mappings, before it fetches anything, extracts
// anew every page the crawl fetched and the store kept (store.Pages,
// where the supervisors keep each page they process), applies the pages
// whose extraction changed to every record that reached them, and
// queues again the pages fetched before and not kept that an incomplete
// record wants; then the crawl goes on from what the new mappings lead to
// (remap.go). Summary.Remap counts what it did.
//
// # Concurrency
//
// Load and Run may run at the same time; a mutex serializes their use of
// the state. Run is the only reader of the intake. Each member has a sender
// goroutine, owned by the Dispatcher and stopped when the member is dropped
// or on Close. Close must be called after Run has returned.
package dispatcher
