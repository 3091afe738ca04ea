// Package store owns what outlives a run: the records with the values found
// for them (and where each came from), the caches that supervisors share
// (robots.txt bodies, each host's last crawl time and soft-404 probe
// verdict; the DNS answers of the crawl's names, Names), and the result
// rows of host surveys (Surveys: one JSON document per domain or ip:port,
// kept byte for byte), and the pages the crawl fetched (Pages: each
// page's body gzip-compressed under the URL asked for, bounded in bytes
// by TrimPages, oldest first), which a rerun whose mappings changed
// extracts anew, learning reads, and export --warc writes out. A
// PageFile is Pages in a SQLite file of its own, for learning without a
// crawl.
//
// Two backends sit behind the same interfaces: an embedded SQLite file (the
// default; nothing to install) and MongoDB for clusters. Open picks one from
// its URI:
//
//	st, err := store.Open(ctx, "state/results.db") // or "file:state/results.db?…"
//	if err != nil { … }
//	defer st.Close()
//
// Every backend passes the conformance suite in store/storetest, so callers
// never branch on the backend; Backend names it for logs.
//
// Data flows one way: the dispatcher puts the seed records once
// (PutRecords, one transaction even for a large batch; each with its input
// text exactly as read, malformed lines included), then calls SetFields
// as results arrive and SetOutcomes when a run ends; export reads them
// back with Records, which streams in input order without holding the
// dataset in memory, and Export turns that stream into JSON Lines or CSV,
// writing the user's values from their input text (the records
// package's scanners) so they
// come back as given. Supervisors read and write the host caches and,
// through resolver.Cache, the DNS cache, and put the pages they fetch;
// the dispatcher reads those back when the mappings changed.
//
// All methods are safe for concurrent use, and every write is an idempotent
// upsert, so a redelivered result changes nothing. Two writes are deliberately
// more than a blind upsert:
//
//   - SetFields on a record that was never put fails with ErrNotFound, so a
//     result can never create a record the input did not have.
//   - PutLastCrawl keeps the later of the stored and the given time, so a
//     delayed or redelivered write never lets a host be crawled sooner.
//
// Times are kept to at least the millisecond (the MongoDB limit) and come
// back in UTC.
//
// # MongoDB
//
// "mongodb://…" and "mongodb+srv://…" URIs open the MongoDB backend through
// the official driver; OpenWith adds what a URI carries badly (a CA file, a
// client certificate, timeouts). It creates its collections and indexes at
// open, keys records and hosts by _id (unique), and writes only whole
// documents by _id (see mongo.go for why: some servers of the protocol do
// not update a document atomically), without transactions. An operation
// that fails for want of the server (a dropped connection, no server
// selectable) is retried with back-off for Options.RetryFor and then fails
// with ErrUnavailable, which callers that keep their data (the dispatcher's
// outbox) retry later. Package mongotest runs an embedded server of the
// protocol for the tests.
//
// # SQLite
//
// The SQLite file runs in WAL mode with a busy timeout, so a dispatcher and
// supervisors on one machine may open the same file from several processes,
// even a new file at the same moment: the switch to WAL, which the busy
// timeout does not cover, is retried.
// Within a process writes go through one connection (SQLite admits one writer
// at a time anyway, and queueing in Go is cheaper than spinning on the file
// lock) and reads through a small pool of read-only connections.
// OpenSQLiteFile opens another component's own SQLite file (a survey's
// state) the same way, with that component's migrations. The schema
// is created at open and versioned with PRAGMA user_version; a file written
// by a newer build is refused rather than misread. Commits use
// synchronous=NORMAL: durable across a process crash, not across a power
// loss; a "file:" URI may add _pragma=synchronous(FULL) to change that.
package store
