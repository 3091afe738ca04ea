// Package bench measures backfill against two other ways of doing the same
// crawl, on the same generated fixture web, in one `go test -bench` run.
//
// BenchmarkCrawl starts one large testweb (BENCH_HOSTS hosts × BENCH_PAGES
// profile pages, robots.txt allowing all, no Crawl-delay) inside the test
// process, then runs each contender as its own OS process so that its peak
// resident memory is its alone:
//
//   - backfill: the real binary, `backfill run` with its SQLite state, no
//     delay, 16 workers;
//   - colly: cmd/collycrawl, the same crawl (records' links plus one level of
//     links, robots.txt obeyed, the same XPath extraction) written with the
//     colly collector, asynchronous with the same parallelism;
//   - httploop: cmd/httploop, 16 goroutines fetching every page URL and
//     reading the body, with no parsing: the ceiling of this machine.
//
// BenchmarkScaleOut and BenchmarkPoliteness run backfill as a cluster of
// OS processes — one `backfill dispatcher` and 1, 2 or 4 `backfill
// supervisor`s on loopback — against a web of 400 hosts: the first with
// 100ms per response and no delay, for pages/s as supervisors are added;
// the second with a Crawl-delay of 2s, for the share of the politeness
// limit (hosts/delay) the crawl achieves and for any request that reached
// its host sooner than the delay allows.
//
// Pages are counted from the fixture web's own request log, not from what a
// contender says it did. This module is separate from backfill's so that
// the comparison's dependencies never enter the backfill binary.
package bench
