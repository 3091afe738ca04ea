package dispatcher

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"backfill/store"
)

// Provenance and purges. Every page's answer in the state says who gave
// it: urls.member is the members row of the key that held the page's
// lease (schemaV8), and every value a record takes carries the member's
// name and key (store.Value.Member, MemberKey) to the store and the
// export. A member found lying (recheck.go), or named by an operator
// (Purge), has every answer it gave taken back (purge):
//
//   - each page it answered is queued again, its cached extraction
//     forgotten, so that another member fetches it (its refusals go);
//   - each record that reached one of them loses the values the member
//     gave it and the conflicting values its pages offered, and is
//     worked on again: its refusals are forgotten, its other pages
//     applied again (a value of the member may have won over theirs, or a
//     match key of the member's made the record refuse them), and its
//     tasks dropped when it completed are queued again;
//   - a value taken out with nothing in its place leaves the store too.
//
// The crawl then fills the records as it fills any, from honest answers.

// memberRow is the members row of key, which goes by name, made on first
// use. Callers hold mu, inside the state transaction.
func (d *Dispatcher) memberRow(ctx context.Context, key, name string) (int64, error) {
	if id, ok := d.memberRows[key]; ok {
		return id, nil
	}
	var id int64
	err := d.st.conn.QueryRowContext(ctx, `INSERT INTO members(key, name) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET name = excluded.name RETURNING id`, key, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("dispatcher: state members: %w", err)
	}
	if d.memberRows == nil {
		d.memberRows = make(map[string]int64)
	}
	d.memberRows[key] = id
	return id, nil
}

// PurgeReport says what purging a member's answers took back.
type PurgeReport struct {
	Member string `json:"member"`
	Key    string `json:"key"`
	// Pages are the pages it answered, queued again; Unknown those whose
	// address the state cannot tell any more (not queued; a record
	// reaching them again queues them).
	Pages   int `json:"pages"`
	Unknown int `json:"unknown_pages,omitempty"`
	// Records are the records that reached its pages; Values the values
	// they lost.
	Records int `json:"records"`
	Values  int `json:"values"`
}

// ErrNoSuchMember: Purge was given a member that answered nothing in the
// state.
var ErrNoSuchMember = errors.New("no member of that name or key answered anything in this crawl")

// Purge takes back every answer of one member, named by its name or its
// key (see purge): its pages are queued again for the next Run, the
// values it gave are taken out of the records, and the store is told.
// For an operator who learns that a member lied; a Run takes back a
// member it finds lying itself (recheck.go). Not while Run runs.
func (d *Dispatcher) Purge(ctx context.Context, member string) (PurgeReport, error) {
	d.mu.Lock()
	keys, err := column[string](d.st.conn.QueryContext(ctx, `SELECT key FROM members WHERE key = ?1 OR name = ?1`, member))
	if err != nil {
		d.mu.Unlock()
		return PurgeReport{}, fmt.Errorf("dispatcher: state members: %w", err)
	}
	switch len(keys) {
	case 0:
		d.mu.Unlock()
		return PurgeReport{}, fmt.Errorf("dispatcher: purge %q: %w", member, ErrNoSuchMember)
	case 1:
	default:
		d.mu.Unlock()
		return PurgeReport{}, fmt.Errorf("dispatcher: purge %q: %d keys went by that name; name the key", member, len(keys))
	}
	var rep PurgeReport
	err = d.inTx(ctx, func(ctx context.Context) error {
		var err error
		rep, err = d.purge(ctx, keys[0])
		return err
	})
	d.mu.Unlock()
	if err != nil {
		return rep, err
	}
	// The store forgets the values taken out now, not at the next Run.
	stored := d.drainOutbox(ctx, d.startOutbox(ctx))
	if stored.pending > 0 {
		return rep, fmt.Errorf("dispatcher: purge %q: %d values not written to the store yet (the next run pushes them)", member, stored.pending)
	}
	return rep, nil
}

// purgedPage is a page a member answered, as purge reads it.
type purgedPage struct {
	key    int64
	url    string // as asked for; "" when the state cannot tell
	source string // where its values came from (its final URL)
	depth  int
}

// purge takes back every answer of the member holding key (see the top
// of this file). Callers hold mu, inside the state transaction.
func (d *Dispatcher) purge(ctx context.Context, key string) (PurgeReport, error) {
	rep := PurgeReport{Key: key, Member: d.members.Name(key)}
	var id int64
	switch err := d.st.conn.QueryRowContext(ctx, `SELECT id, name FROM members WHERE key = ?`, key).Scan(&id, &rep.Member); {
	case errors.Is(err, sql.ErrNoRows):
		return rep, nil // it answered nothing the state kept
	case err != nil:
		return rep, fmt.Errorf("dispatcher: state members: %w", err)
	}
	pages, err := d.memberPages(ctx, id)
	if err != nil {
		return rep, err
	}
	sources := make(map[string]bool, len(pages))
	var recs []int64
	for _, p := range pages {
		sources[p.source] = true
		seqs, err := column[int64](d.st.conn.QueryContext(ctx, `SELECT rec FROM links WHERE url = ?`, p.key))
		if err != nil {
			return rep, err
		}
		recs = append(recs, seqs...)
		if _, err := d.st.conn.ExecContext(ctx, `UPDATE urls SET result = NULL, class = '', status = 0, last_crawled = 0,
			found = 0, member = NULL, etag = '', last_modified = '', attempts = 0 WHERE key = ?`, p.key); err != nil {
			return rep, fmt.Errorf("dispatcher: state urls: %w", err)
		}
		if _, err := d.st.conn.ExecContext(ctx, `DELETE FROM refusals WHERE page = ?`, p.source); err != nil {
			return rep, fmt.Errorf("dispatcher: state refusals: %w", err)
		}
		if p.url == "" {
			rep.Unknown++
			continue
		}
		if _, err := d.requeueDone(ctx, p.key, p.url, p.depth); err != nil {
			return rep, err
		}
		rep.Pages++
	}
	slices.Sort(recs)
	recs = slices.Compact(recs)
	rep.Records = len(recs)
	for _, seq := range recs {
		n, err := d.reopen(ctx, seq, key, sources)
		if err != nil {
			return rep, err
		}
		rep.Values += n
		if err := d.drainWork(ctx); err != nil {
			return rep, err
		}
	}
	d.run.purged += int64(rep.Pages)
	d.log.Warn("member's answers taken back: its pages are fetched again by others, the values it gave are taken out",
		"member", rep.Member, "key", key, "pages", rep.Pages, "unknown_pages", rep.Unknown, "records", rep.Records, "values", rep.Values)
	return rep, d.flush(ctx)
}

// memberPages reads the pages the members row id answered, with the
// address each was asked for: what the supervisor said it ended at
// (Source) unless the dispatcher noted the address it asked (Task), and
// only if that is the page's.
func (d *Dispatcher) memberPages(ctx context.Context, id int64) ([]purgedPage, error) {
	rows, err := d.st.conn.QueryContext(ctx, `SELECT key, depth, url, result FROM urls WHERE member = ? AND state = 2`, id)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	defer rows.Close()
	var out []purgedPage
	for rows.Next() {
		var p purgedPage
		var u sql.NullString
		var blob []byte
		if err := rows.Scan(&p.key, &p.depth, &u, &blob); err != nil {
			return nil, fmt.Errorf("dispatcher: state urls: %w", err)
		}
		if u.Valid && urlKey(u.String) == p.key { // a failure keeps its address
			p.url, p.source = u.String, u.String
		}
		if len(blob) > 0 {
			var res cachedResult
			if err := json.Unmarshal(blob, &res); err != nil {
				return nil, fmt.Errorf("dispatcher: state cached result %s: %w", taskID(p.key), err)
			}
			p.source = res.Source
			for _, u := range []string{res.Task, res.Source} {
				if u != "" && urlKey(u) == p.key {
					p.url = u
					break
				}
			}
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// reopen takes out of record seq the values the member holding key gave
// it, and the conflicting values the member's pages (sources) offered,
// and works on the record again: its refusals are forgotten, its other
// pages applied again (queued in d.work) and the tasks dropped when it
// completed are queued again. It returns how many values it took out.
func (d *Dispatcher) reopen(ctx context.Context, seq int64, key string, sources map[string]bool) (int, error) {
	r, err := d.loadRec(ctx, seq)
	if err != nil {
		return 0, err
	}
	wasPartial := !r.complete && len(r.filled) > 0
	removed, changed := 0, false
	for f, v := range r.filled {
		if v.MemberKey == key {
			delete(r.filled, f)
			r.changed[f] = true
			removed++
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(v.Conflicts), func(c store.Conflict) bool { return sources[c.Source] })
		if len(kept) != len(v.Conflicts) {
			if len(kept) == 0 {
				kept = nil
			}
			v.Conflicts = kept
			r.filled[f] = v
			r.changed[f] = true
			changed = true
		}
	}
	if removed == 0 && !changed {
		return 0, nil
	}
	r.markDirty()
	if removed == 0 {
		return 0, nil
	}
	switch {
	case r.complete && !r.isComplete():
		r.complete = false
		d.nComplete--
		if len(r.filled) > 0 {
			d.nPartial++
		}
	case wasPartial && len(r.filled) == 0:
		d.nPartial--
	}
	if _, err := d.st.conn.ExecContext(ctx, `DELETE FROM refusals WHERE rec = ?`, seq); err != nil {
		return 0, fmt.Errorf("dispatcher: state refusals: %w", err)
	}
	// Links to tasks dropped when it completed are forgotten, so that
	// applying its pages again queues them again.
	if _, err := d.st.conn.ExecContext(ctx, `DELETE FROM links WHERE rec = ? AND url IN (SELECT l.url FROM links l JOIN urls u ON u.key = l.url
		WHERE l.rec = ? AND u.state = 3)`, seq, seq); err != nil {
		return 0, fmt.Errorf("dispatcher: state links: %w", err)
	}
	if err := d.reapply(ctx, r); err != nil {
		return 0, err
	}
	return removed, nil
}

// reapply queues, as work for record r, its pages answered and kept (the
// nearest first), and attaches its own links again.
func (d *Dispatcher) reapply(ctx context.Context, r *recState) error {
	rows, err := d.st.conn.QueryContext(ctx, `SELECT l.url, l.depth, l.via, u.result FROM links l JOIN urls u ON u.key = l.url
		WHERE l.rec = ? AND u.state = 2 AND u.class = '' AND u.result IS NOT NULL ORDER BY l.depth, l.url`, r.seq)
	if err != nil {
		return fmt.Errorf("dispatcher: state links: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var it applyItem
		var via sql.NullString
		var blob []byte
		if err := rows.Scan(&key, &it.depth, &via, &blob); err != nil {
			return fmt.Errorf("dispatcher: state links: %w", err)
		}
		if via.Valid {
			if err := json.Unmarshal([]byte(via.String), &it.via); err != nil {
				return fmt.Errorf("dispatcher: state links: redirect chain of record %d: %w", r.seq, err)
			}
		}
		if it.res, err = d.results.decode(key, blob); err != nil {
			return fmt.Errorf("dispatcher: state cached result %s: %w", taskID(key), err)
		}
		it.rec = r.seq
		d.work = append(d.work, it)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state links: %w", err)
	}
	rows.Close()
	var blob []byte
	if err := d.st.q.ownLinks.QueryRowContext(ctx, r.seq).Scan(&blob); err != nil {
		return fmt.Errorf("dispatcher: state links of %q: %w", r.id, err)
	}
	var links []string
	if len(blob) > 0 {
		if err := json.Unmarshal(blob, &links); err != nil {
			return fmt.Errorf("dispatcher: state links of %q: %w", r.id, err)
		}
	}
	n := r.queued
	if err := d.attachLinks(ctx, links, r.seq, &r.queued, 0); err != nil {
		return err
	}
	if r.queued != n {
		r.markDirty() // the budget count is kept with the record
	}
	return nil
}
