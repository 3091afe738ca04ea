// Package supervisor runs the workers of one crawl node: it takes tasks
// from the dispatcher, fetches each URL politely, runs the site mappings on
// the page and sends back what it found.
//
// # Talking to the dispatcher
//
// New binds the task socket (a ZeroMQ PULL, by default on a free loopback
// port; see Endpoint) and dials the dispatcher's intake. Run then sends
// Hello — name, advertised endpoint, Capacity, the mapping set's digest and
// the start time — again and again with back-off (200ms doubling up to
// HelloMax) until a Welcome arrives on the task socket, saying at Warn level
// that the dispatcher is not answering, after a few attempts what to check
// (with keys: the dispatcher's public key and that ours is authorised, as
// a refused CURVE handshake is silent), and then only now and then. From
// then on it sends a Heartbeat every Heartbeat interval; heartbeats carry
// the Hello fields, so a dispatcher that restarted learns about the
// supervisor again. When the dispatcher's run is finished it says Bye:
// with Config.ExitWhenDone Run returns, otherwise the supervisor stops
// heart-beating and waits quietly, with a Hello now and then, for the
// dispatcher's next run.
//
// With Config.Keys both sockets use CURVE: the intake is dialled expecting
// Config.DispatcherKey, the task socket accepts that key alone, and Hello
// advertises Keys.Public so the dispatcher can dial it. Without keys both
// endpoints must be loopback unless Config.Insecure.
//
// One goroutine owns the task socket and reads Welcomes, Tasks and Byes;
// one owns the Hello/Heartbeat schedule; workers send each Result on the
// shared Sender themselves. They run in one errgroup: when one fails (the
// task socket breaks) they all stop and Run returns the error. Every Task taken is answered with exactly one Result
// echoing its ID and Lease, unless the supervisor shuts down first (the
// lease then brings the task back).
//
// # Politeness
//
// Tasks are queued per host (lower-case host[:port]). A host is handed to
// at most one worker at a time, and becomes ready when its delay since the
// end of its last request has passed; ready hosts are served in order of
// readiness from a min-heap, so a worker never sleeps on one host while
// another is ready, and Workers bounds the fetches in progress. Per turn a
// host makes at most one request:
//
//   - the robots.txt, when its rules are not known or expired: fetched
//     (robotsfetch.go) as RFC 9309 says (at most five redirects, 500 KiB
//     parsed), read by the robots package for the User-Agent's product
//     token, and cached in Config.Cache for RobotsTTL (4xx allows
//     everything; 5xx, 429, or a reset or garbled answer once connected
//     disallows everything, answered "robots-unavailable", and a host that
//     cannot be reached at all has its pages answered with the network
//     class; either way until a retry succeeds, RobotsRetry later and
//     doubling);
//   - else, once per host and after its first page (which is thus asked
//     right after robots.txt), the soft-404 probe: an invented path whose
//     200 answer fingerprints the host's "not found" page (soft404.go);
//     the verdict goes to Config.Cache with the lifetime of the host's
//     robots.txt entry, so no supervisor asks again before then. The
//     first page goes out unjudged unless it reads like a not-found, in
//     which case it waits on its host for the verdict; a host with one
//     page is not probed unless that page reads so;
//   - else the first queued page, unless robots.txt disallows it (answered
//     with class "robots" and no request) or asks for a Crawl-delay over
//     MaxCrawlDelay (class "crawl-delay"), or the host is blacklisted
//     (class "blacklisted"). A page answered 429 or 503 is asked again
//     after its Retry-After, up to three times.
//
// Hosts in trouble back off exponentially, and hosts and addresses that
// keep failing are blacklisted for the run (health.go).
//
// The delay is the robots.txt Crawl-delay, else DefaultDelay, counted from
// the end of one request to the start of the next, so requests never reach
// a host closer together than the delay. The supervisor keeps the end of
// each host's last request in memory and writes these times to
// Config.Cache in one batch every 250ms (and on shutdown), so a host that
// moves to another supervisor keeps its delay. Before a request to a host
// with a delay it also writes the request's start to the cache and waits
// for the write (reserve; concurrent workers share one write), so even a
// supervisor killed mid-request leaves its latest request in the cache.
// The cache is read on first sight of a host and whenever our own last
// request to it is older than that interval; a time read from it that
// another supervisor wrote is padded by the interval, since its writer may
// have made a later request not yet written. Supervisors that share no
// cache still keep the delay across a move: the dispatcher sends a moved
// host's first tasks with the time it last heard of the host from its old
// owner (wire.Task.HostLast), and the delay runs from the later of the two.
//
// # Pages
//
// A fetched page is handed back to its host at once and processed off it
// (result.go): the mappings run on the final URL and body, and the Result
// carries the matched mappings, field values (with their match-key flag),
// links (url_parsers' marked Parsed, then every outbound link), field
// errors, status, size and final URL. A failed fetch carries its fetch
// class; a panic while processing a page is recovered, answered with class
// "panic" and counted. Stats reports the counters. With Config.Pages, every
// page processed is also kept there (the crawl's store) as the mappings
// read it, behind the workers and within Config.KeepBytes, for a rerun
// whose mappings changed to extract it anew without a request (keep.go).
//
// # Render nodes
//
// With Config.Render set, New starts a headless browser (render.go: a
// bounded pool of tabs), and Hello and Heartbeat say Render, so the
// dispatcher sends this supervisor the tasks that need JavaScript. A task
// marked Render takes the same turn as any other — robots.txt first, one
// request, the host's delay — and its one request fetches the page's HTML
// with the fetcher; when the page was fetched here a moment ago and looked
// like a JavaScript shell (renderdocs.go), the HTML kept from then is used
// and no request is made. The page is then loaded in a tab off the
// workers, and the DOM it ends with is run through the mappings like a
// fetched body. The browser makes no request itself: every request of the
// page is paused and answered by the supervisor (renderintercept.go). The
// ones a page may have — its scripts, the GET requests scripts make, and
// the resource kinds its mappings list in render_resources — are queued on
// their hosts in the scheduler like tasks, ahead of them (subrequest.go),
// and made in a turn of their own under the same politeness as a page:
// robots.txt, the delay, one request at a time per host, the address
// guard; an answer one page had is shared with the next that asks
// (rendercache.go). Everything else is refused without a request. A page's
// deadline does not count the time its requests wait for their hosts
// (pageclock.go). A browser that dies, or that was stopped after a minute
// without a render, is started again on the next render;
// Heartbeat.RenderRSS and Stats.Render report its memory (its whole
// process tree) and its requests, and Close leaves none of its processes
// behind.
//
// Every result of a page a mapping with url_patterns matched says whether
// its HTML looks like a JavaScript shell (Result.JSOnly, etl.JSOnly): the
// dispatcher decides from it, and from what the records still need,
// whether the page is worth a render.
//
// # Host surveys
//
// With Config.Prober (package survey's, filled in by the command), the
// supervisor also runs host-survey tasks (wire.SurveyTask) from a survey's
// dispatcher, and Hello says so. Each task is one address, probed on its
// own goroutine by the Prober, which keeps the survey's politeness; at
// most Capacity run at once and each is answered with one SurveyResult
// echoing its ID and Lease (survey.go). A task sent again while it is
// held (its lease ran out, or the dispatcher took the supervisor for
// gone) is not run a second time: the run in progress answers it. Every
// Heartbeat lists the survey tasks held (Surveys), which renews their
// leases. The crawl's host queues are not involved: a survey never
// fetches pages.
//
// # For operators
//
// Collector serves the supervisor's counters to Prometheus when scraped,
// and the latency histograms of page fetches and renders (metrics.go).
// The pace ledger (pace.go) notes every request to a host, its start,
// its length and the delay owed since the one before; heartbeats carry a
// bounded selection of it (the busiest hosts, the slowest to answer and
// those asked closest together for their delay), the robots.txt outcomes
// and the hosts in back-off, which the dispatcher shows on its status
// page and keeps for the run report. With Logger at debug level, each
// page gets one line naming its URL, host, status and failure class.
//
// # Memory
//
// Memory is bounded by configuration, whatever the number of hosts a
// crawl meets. At most Capacity tasks are held, queued or in progress; the
// dispatcher never sends more, and any excess is dropped and logged.
// Bodies are bounded by the fetcher's cap and by Workers, and the pages
// being extracted (parsed into trees) by the CPUs. What is kept
// per host is bounded by Config.MaxHosts, the least recently used going
// first (lru.go):
//
//   - the scheduler keeps at most MaxHosts idle hosts (hosts with tasks
//     are bounded by Capacity). A host is forgotten even within its
//     delay: the end of its last request is in the cache, or in the
//     buffer on its way there, which a host's first turn reads, so the
//     delay holds when it comes back (its robots.txt is read from the
//     cache too, or asked again if the host could not be reached);
//   - the health registry keeps at most MaxHosts hosts and as many
//     addresses in trouble. A host forgotten while held back (Retry-After,
//     back-off) has its wait written to the cache as the end of its last
//     request, so it waits at least as long; a blacklisting is kept while
//     the host's tasks keep asking about it, and one forgotten is learned
//     again from the host's next failures, spaced by back-off;
//   - soft-404 verdicts of at most MaxHosts hosts (the rest are read
//     again from the cache), the pace ledger's 4,096 busiest-recent
//     hosts, and a render node's cache of page requests, bounded in bytes
//     and in answers;
//   - each fetcher moves to a fresh http.Transport after MaxHosts distinct
//     hosts (fetch.Config.MaxTransportHosts), since a Transport keeps
//     state for every host it was asked for;
//   - the buffer of last-crawl times holds the hosts crawled since the
//     last flush; while the cache fails, only the times that may still
//     space out a request are kept for the next one.
//
// Pages waiting to be kept (keep.go) take at most 32 MiB of bodies; a
// page past that is not kept, and counted.
//
// The good answers sent in the last two minutes, which a restarted
// dispatcher takes instead of having their pages fetched again
// (answers.go), are at most Capacity and 32 MiB.
//
// Without Config.Cache the in-memory cache keeps robots.txt entries and
// soft-404 verdicts of at most MaxHosts hosts and last-crawl times for as
// long as they may space out a request (the longest delay honoured): the
// only table bounded by the crawl's pace rather than by a count.
//
// # Shutdown
//
// Cancelling Run's context stops the workers, the reader and the sender,
// sends the results of the pages already fetched (within stopGrace),
// drops queued tasks (their leases bring them back), writes the pages
// waiting to be kept and the buffered last-crawl times (within stopGrace
// each) and closes both sockets and the fetcher; when Run
// returns, no goroutine of the supervisor is left.
package supervisor
