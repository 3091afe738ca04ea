// Package testweb is the fixture web that backfill's tests and its
// benchmarks crawl: real HTTP servers on loopback that answer for several
// real-looking host names, with a log of every request they receive.
// The binary does not link it: the demo serves a snapshot of the small
// web (package demoweb, held to SmallSite and Sample by its test).
//
// One listener on 127.0.0.1 serves every host; the Host header picks the
// site, and a Host the web does not know gets 404. A crawler reaches it
// under the hosts' own names through a resolver override:
//
//	web, err := testweb.Start(testweb.Options{CrawlDelay: testweb.DefaultCrawlDelay})
//	if err != nil { … }
//	defer web.Close()
//	f := fetch.New(fetch.Config{UserAgent: ua, Resolve: web.Resolve(), AllowLoopback: true})
//	resp, err := f.Get(ctx, "http://people.example/p/alice")
//
// Start serves the small web, written by hand for the end-to-end test and
// the demo: people.example and staff.example.org hold profiles in two
// layouts (extracted by the bundled mappings testweb-people and
// testweb-staff), blog.example.net holds personal homepages that link to
// them, team.example holds a team page linking to four colleagues'
// profiles, quiet.example holds nothing useful, and app.example holds
// profiles whose HTML is empty until a script loads the person's data and
// writes it into the DOM (extracted by testweb-app once rendered). Every
// host's robots.txt sets the Crawl-delay of Options and disallows
// /private/, where pages hold values a polite crawler must never see.
// Sample returns the records to
// crawl it with and the exact truth a correct crawl ends with; its comments
// explain each record. NeverFetched lists the URLs a correct crawl never
// requests. A directory named without its slash (/~alice) answers 301 to
// the slash form, as real servers do. A crawl of Sample at depth limit 1
// asks people.example for at most 8 pages, staff.example.org and
// blog.example.net for at most 5, quiet.example for 3 and team.example for
// 2 (robots.txt included), plus one invented path per host with more
// than one page (the supervisor's soft-404 probe), so at a Crawl-delay of
// 1 s it takes about ten seconds.
//
// SampleJS returns records for app.example and the truth a crawl ends with
// when a render-capable supervisor takes part; without one its records stay
// unfilled. It is kept apart from Sample so that crawls without a browser
// keep one truth.
//
// StartLarge serves a generated web for benchmarks: hundreds of hosts with
// an index and many profiles each, no Crawl-delay, and LargeRecords to crawl
// every page of it exactly once.
//
// StartPeople serves the people web (people.go): generated hosts of
// people's profiles in five layouts (a labelled list, a table, prose,
// JavaScript-written, JSON-LD) that five mappings sharing one URL pattern
// extract (PeopleMappings); a structured people web has a script-JSON
// blob in the JavaScript layout's place and locations in pieces in the
// blob and the JSON-LD (StructuredPeopleMappings). Its records' profiles
// are one or two links from the record's link, some only through another
// person's profile, and some pages many records reach. Its size is set
// by PeopleOptions, small for tests and large for benchmarks.
// PeopleRecords returns the records and PeopleTruth what a correct crawl
// of them ends with, at a depth, with or without rendering and with hosts
// down, computed from the model that serves the pages (people.go) and
// writes them (peoplepages.go); PeopleOracleOf the fewest requests a
// crawler that knows the web makes for it (peopleoracle.go). Its hosts
// ask one Crawl-delay, or each its own in a range (PeopleHostDelay).
//
// SetDown takes a host of any web down in what Resolve returns (its
// connections are refused) and brings it back, for crawls that fail and
// are run again.
//
// StartTemplates serves five hosts, one per way of publishing a person's
// details (a labelled list, a table, prose with an obfuscated email, a
// JSON blob in a script, JSON-LD), each with decoys; TemplateProfiles
// says what every profile shows. Learned mappings are measured on it.
//
// Log returns what was asked, in arrival order, with the User-Agent, the
// status sent and when the response ended, so tests can check politeness
// (robots.txt obeyed, intervals per host, nothing fetched twice) from the
// server's side. CheckPoliteness (politeness.go) does the last two for any
// log of Requests: the URLs requested again, and the intervals from the end
// of a host's response to its next request's arrival that are shorter than
// the host's delay. Options.Latency
// and LargeOptions.Latency delay every response to imitate distant servers.
//
// A Web is safe for concurrent use. Close stops the listener, waits for the
// requests in flight and leaves no goroutine behind. testweb imports no
// other package of backfill, so any of them may use it in tests.
package testweb
