package dispatcher

import (
	"backfill/records"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"backfill/store"
)

// Taking in records in bulk, and seeding the frontier with their links.
//
// Load hands loadBatch a few thousand records at a time. The records go
// in with a few multi-row inserts (insertRecords), which return the seqs
// of those new to the state, so no record is looked up first; each keeps
// its own links (the links column), and the store takes the new records
// on a goroutine of its own meanwhile (another file, another connection:
// the second core). Those inserts append: records are keyed by seq.
//
// A record's links enter the seen store and the frontier when the
// frontier reaches the record: refill seeds the next records in seq order
// (seedMore, behind the meta key "seeded") whenever the window has room.
// Seeding is the costly part — a URL key is a hash, so each new URL is an
// insert at a random place in urls and links, a page written per URL once
// the tables outgrow SQLite's cache — and done at intake it made taking in
// a million records take minutes; done as the frontier drains it is paced
// by the crawl, and a crawl of the first records starts at once. A URL
// found on a page that is also a record's own link not yet seeded is
// queued as found; the record, seeded later, finds it in the seen store
// like any known URL.
//
// attachSeeds seeds a chunk of records with a handful of statements: the
// seen filter rules out nearly every new URL, the few it may hold are
// looked up in chunks, the hosts' budget counts are read in chunks, and
// the new URLs and links are inserted in key order, several hundred rows
// a statement. One statement per row was most of the cost: each pays
// database/sql's and the driver's overhead on top of the B-tree work.

// recChunk and rowChunk bound the rows of one multi-row statement (SQLite
// takes at most 32,766 parameters).
const (
	recChunk = 256
	rowChunk = 512
)

// chunkSizes splits n rows into statements: as many of most rows as fit,
// then the rest in powers of two, so that each kind of statement is
// prepared in a few sizes only (stmtN keeps one per size).
func chunkSizes(n, most int) []int {
	var out []int
	for ; n >= most; n -= most {
		out = append(out, most)
	}
	for size := most / 2; size > 0; size /= 2 {
		if n >= size {
			out = append(out, size)
			n -= size
		}
	}
	return out
}

// seed is a new record's links for attachSeeds.
type seed struct {
	seq   int64
	links []string
}

// newRecord is a record new to the state; complete says it had nothing to
// fill.
type newRecord struct {
	store.Record
	complete bool
}

// dupLine is a record of recs whose id another line of the same file had.
type dupLine struct {
	i   int
	err *records.LineError
}

// insertRecords inserts recs (good ones, their seqs set, with their lines
// in the file numbered num) and returns those new to the state and the
// duplicates: records whose id another line of the same file had (a good
// one, or a malformed one kept under that id). Known records (taken in
// before, or of another file) are left out of both. A record left
// without a link to start from keeps the start of its own link refused
// for its length (long, by id), if it had one.
func (d *Dispatcher) insertRecords(ctx context.Context, recs []store.Record, long map[string]string, lines []int, num int64, name string) (fresh []newRecord, dups []dupLine, err error) {
	// An id a malformed line of the state holds is taken too: by a line
	// of this file, a duplicate; of another, known.
	idx, dups, err := d.notMalformed(ctx, recs, lines, num, name)
	if err != nil {
		return nil, nil, err
	}
	for _, size := range chunkSizes(len(idx), recChunk) {
		part := idx[:size]
		idx = idx[size:]
		st, err := d.st.stmtN(ctx, "recInsN", len(part), func(n int) string {
			return `INSERT INTO records(seq, id, file, line, own, links, targets, complete, skipped, queued, long) VALUES ` +
				placeholders(n, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)") + ` ON CONFLICT(id) DO NOTHING RETURNING seq`
		})
		if err != nil {
			return nil, nil, err
		}
		args := make([]any, 0, 11*len(part))
		complete := make([]bool, len(part))
		for i, j := range part {
			r := &recs[j]
			targets := d.targets(*r)
			ts, err := d.targetSet(ctx, targets)
			if err != nil {
				return nil, nil, err
			}
			own, err := d.ownValues(*r)
			if err != nil {
				return nil, nil, err
			}
			complete[i] = len(targets) == 0
			queued := 0
			var links []byte
			var tooLong any
			if !complete[i] {
				kept := d.keepLinks(r.Links, 0)
				queued = len(kept) // charged up front: see linkFilter.budget
				if len(kept) > 0 {
					if links, err = json.Marshal(kept); err != nil {
						return nil, nil, fmt.Errorf("dispatcher: record %q: %w", r.ID, err)
					}
				} else if l := long[r.ID]; l != "" {
					tooLong = longLink(l)
				}
			}
			args = append(args, r.Seq, r.ID, num, lines[j], own, links, ts, b2i(complete[i]), b2i(complete[i]), genCount(d.gen, queued), tooLong)
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("dispatcher: state records: %w", err)
		}
		inserted := make(map[int64]bool, len(part))
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("dispatcher: state records: %w", err)
			}
			inserted[seq] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("dispatcher: state records: %w", err)
		}
		for i, j := range part {
			r := recs[j]
			if inserted[r.Seq] {
				fresh = append(fresh, newRecord{r, complete[i]})
				d.nRecords++
				if complete[i] {
					d.nComplete++
				}
				continue
			}
			var file int64
			var line int
			if err := d.st.q.recFirst.QueryRowContext(ctx, r.ID).Scan(&file, &line); err != nil {
				return nil, nil, fmt.Errorf("dispatcher: state record %q: %w", r.ID, err)
			}
			if file == num && line != lines[j] {
				dups = append(dups, dupLine{j, &records.LineError{File: name, Line: lines[j], Reason: fmt.Sprintf("duplicate id %q (first on line %d)", r.ID, line)}})
			}
		}
	}
	// In file order, as the parser reports lines.
	slices.SortFunc(dups, func(a, b dupLine) int { return cmp.Compare(a.i, b.i) })
	return fresh, dups, nil
}

// seedChunk is how many records one seedMore reads.
const seedChunk = 1024

// unseeded reports whether records wait to be seeded.
func (d *Dispatcher) unseeded() bool { return d.seeded < d.recSeq }

// seedMore seeds the next records (in seq order, after d.seeded) with
// their own links, up to seedChunk of them, and reports how many tasks
// that queued.
func (d *Dispatcher) seedMore(ctx context.Context) (int, error) {
	rows, err := query(ctx, d.st.q.recSeeds, d.seeded, seedChunk)
	if err != nil {
		return 0, err
	}
	var seeds []seed
	n := 0
	for rows.Next() {
		var s seed
		var blob []byte
		if err := rows.Scan(&s.seq, &blob); err != nil {
			rows.Close()
			return 0, fmt.Errorf("dispatcher: state records: %w", err)
		}
		if err := json.Unmarshal(blob, &s.links); err != nil {
			rows.Close()
			return 0, fmt.Errorf("dispatcher: state links of record %d: %w", s.seq, err)
		}
		seeds = append(seeds, s)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("dispatcher: state records: %w", err)
	}
	if n < seedChunk {
		d.seeded = d.recSeq // read to the end
	} else {
		d.seeded = seeds[n-1].seq
	}
	before := d.queuedN
	if err := d.attachSeeds(ctx, seeds); err != nil {
		return 0, err
	}
	// Cached extractions of known URLs apply at once; their values go to
	// the state and the outbox with the records.
	if err := d.drainWork(ctx); err != nil {
		return 0, err
	}
	if err := d.flush(ctx); err != nil {
		return 0, err
	}
	return d.queuedN - before, nil
}

// seedLink is one record's link to one URL.
type seedLink struct {
	key int64
	rec int64
}

// attachSeeds attaches the new records' own links (depth 0), as
// attachLinks would one record at a time, with a handful of statements
// for the whole batch.
func (d *Dispatcher) attachSeeds(ctx context.Context, seeds []seed) error {
	type ref struct {
		key  int64
		norm string
		rec  int64
	}
	var refs []ref
	var maybe []int64
	for _, s := range seeds {
		for _, norm := range s.links {
			key := urlKey(norm)
			refs = append(refs, ref{key, norm, s.seq})
			if d.seenKeys.mayHave(key) {
				maybe = append(maybe, key)
			}
		}
	}
	known, err := d.lookupKeys(ctx, maybe)
	if err != nil {
		return err
	}
	var fresh []*task
	pending := make(map[int64]bool)
	var links []seedLink
	var hosts []string
	for _, r := range refs {
		if k, ok := known[r.key]; ok {
			links = append(links, seedLink{r.key, r.rec})
			if err := d.revisit(ctx, r.key, r.norm, r.rec, 0, nil, k); err != nil {
				return err
			}
			continue
		}
		if pending[r.key] {
			links = append(links, seedLink{r.key, r.rec})
			continue
		}
		host, domain := hostDomain(r.norm)
		if host == "" {
			d.log.Debug("link without a host ignored", "url", r.norm, "record", r.rec)
			continue
		}
		matched, prio := d.cfg.Mappings.Matches(r.norm)
		t := &task{key: r.key, url: r.norm, host: host, domain: domain, depth: 0,
			matched: matched, priority: prio, render: d.cfg.Mappings.NeedsRender(r.norm)}
		pending[r.key] = true
		fresh = append(fresh, t)
		links = append(links, seedLink{r.key, r.rec})
		if d.hosts[host] == nil {
			hosts = append(hosts, host)
		}
	}
	if err := d.readHostCounts(ctx, hosts); err != nil {
		return err
	}
	// Charge the hosts (a record's own links are never refused; the
	// records were charged when inserted) and rank each task among its
	// host's, in the order the links came.
	for _, t := range fresh {
		hc := d.hosts[t.host]
		hc.n++
		hc.dirty = true
		d.nextSeq++
		t.seq = rankedSeq(hc.n, d.nextSeq)
	}
	if err := d.insertURLs(ctx, fresh); err != nil {
		return err
	}
	if err := d.insertLinks(ctx, links, 0); err != nil {
		return err
	}
	for _, t := range fresh {
		d.queuedN++
		d.w.add(t, false)
	}
	return nil
}

// lookupKeys reads what the seen store knows of keys, a chunk at a time.
func (d *Dispatcher) lookupKeys(ctx context.Context, keys []int64) (map[int64]knownURL, error) {
	known := make(map[int64]knownURL)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, size := range chunkSizes(len(keys), rowChunk) {
		part := keys[:size]
		keys = keys[size:]
		st, err := d.st.stmtN(ctx, "keysGet", len(part), func(n int) string {
			return `SELECT key, state, depth, last_crawled, class, result FROM urls WHERE key IN (` + placeholders(n, "?") + `)`
		})
		if err != nil {
			return nil, err
		}
		args := make([]any, len(part))
		for i, k := range part {
			args[i] = k
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("dispatcher: state urls: %w", err)
		}
		for rows.Next() {
			var key int64
			var k knownURL
			if err := rows.Scan(&key, &k.state, &k.depth, &k.last, &k.class, &k.result); err != nil {
				rows.Close()
				return nil, fmt.Errorf("dispatcher: state urls: %w", err)
			}
			known[key] = k
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("dispatcher: state urls: %w", err)
		}
	}
	return known, nil
}

// readHostCounts puts the budget counts of hosts (none of them cached)
// in the cache, a chunk at a time.
func (d *Dispatcher) readHostCounts(ctx context.Context, hosts []string) error {
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	for _, h := range hosts {
		d.hosts[h] = &hostCount{}
	}
	for _, size := range chunkSizes(len(hosts), rowChunk) {
		part := hosts[:size]
		hosts = hosts[size:]
		st, err := d.st.stmtN(ctx, "hostsGet", len(part), func(n int) string {
			return `SELECT host, queued FROM hosts WHERE host IN (` + placeholders(n, "?") + `)`
		})
		if err != nil {
			return err
		}
		args := make([]any, len(part))
		for i, h := range part {
			args[i] = h
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("dispatcher: state hosts: %w", err)
		}
		for rows.Next() {
			var h string
			var v int64
			if err := rows.Scan(&h, &v); err != nil {
				rows.Close()
				return fmt.Errorf("dispatcher: state hosts: %w", err)
			}
			d.hosts[h].n = countOf(d.gen, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("dispatcher: state hosts: %w", err)
		}
	}
	return nil
}

// insertURLs puts new URLs in the seen store as queued tasks, in key
// order, rowChunk rows a statement, and adds their keys to the filter.
func (d *Dispatcher) insertURLs(ctx context.Context, ts []*task) error {
	if len(ts) == 0 {
		return nil
	}
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b *task) int { return cmp.Compare(a.key, b.key) })
	now := time.Now().UnixNano()
	for _, size := range chunkSizes(len(sorted), rowChunk) {
		part := sorted[:size]
		sorted = sorted[size:]
		st, err := d.st.stmtN(ctx, "urlIns", len(part), func(n int) string {
			return `INSERT INTO urls(key, url, depth, matched, priority, render, seq, state, first_seen, hops) VALUES ` +
				placeholders(n, "(?, ?, ?, ?, ?, ?, ?, 0, ?, ?)")
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 9*len(part))
		for _, t := range part {
			args = append(args, t.key, t.url, t.depth, b2i(t.matched), t.priority, b2i(t.render), t.seq, now, t.hops)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state urls: %w", err)
		}
		for _, t := range part {
			d.seenKeys.add(t.key)
		}
	}
	return d.growSeenFilter(ctx)
}

// insertLinks records the records' links at depth, in (url, record)
// order, rowChunk rows a statement; a record that reached a URL before
// keeps the smaller depth.
func (d *Dispatcher) insertLinks(ctx context.Context, links []seedLink, depth int) error {
	slices.SortFunc(links, func(a, b seedLink) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rec, b.rec))
	})
	links = slices.Compact(links)
	for _, size := range chunkSizes(len(links), rowChunk) {
		part := links[:size]
		links = links[size:]
		st, err := d.st.stmtN(ctx, "linkIns", len(part), func(n int) string {
			return `INSERT INTO links(url, rec, depth) VALUES ` + placeholders(n, "(?, ?, ?)") +
				` ON CONFLICT(url, rec) DO UPDATE SET depth = excluded.depth WHERE excluded.depth < links.depth`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*len(part))
		for _, l := range part {
			args = append(args, l.key, l.rec, depth)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state links: %w", err)
		}
	}
	return nil
}
