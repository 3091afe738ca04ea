package dispatcher

import (
	"backfill/records"
	"context"
	"fmt"
	"slices"

	"backfill/store"
)

// Malformed lines in Load. The parser hands on a malformed line as a
// record with Error set and the id "line N"; loadBatch numbers it in the
// input order with the good records, and insertMalformed keeps it: in the
// state's malformed table (its id, seq, file and line) and in the store,
// for export to give back in its place, marked. A record whose id another
// line of the same file had is one too (the state finds those, see
// insertRecords and notMalformed: the parser keeps no set of ids, which
// for millions of records is the state's to keep).
//
// Ids stay unique across both tables: a malformed line takes "line N", or
// "line N (2)", … when a record or another malformed line has that id,
// and a record whose id a malformed line of the same file holds is a
// duplicate of it. A malformed line taken in before (the same file and
// line: a Load resumed after a crash reads the uncommitted rest again) is
// not kept twice.

// notMalformed returns the indexes of recs whose ids no malformed line of
// the state holds, and as duplicates those a malformed line of the same
// file (numbered num) holds; a record whose id a malformed line of
// another file holds is known and left out of both.
func (d *Dispatcher) notMalformed(ctx context.Context, recs []store.Record, lines []int, num int64, name string) ([]int, []dupLine, error) {
	idx := make([]int, 0, len(recs))
	if d.nMalformed == 0 {
		for i := range recs {
			idx = append(idx, i)
		}
		return idx, nil, nil
	}
	type badLine struct {
		file int64
		line int
	}
	held := make(map[string]badLine)
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, size := range chunkSizes(len(ids), rowChunk) {
		part := ids[:size]
		ids = ids[size:]
		st, err := d.st.stmtN(ctx, "badGet", len(part), func(n int) string {
			return `SELECT id, file, line FROM malformed WHERE id IN (` + placeholders(n, "?") + `)`
		})
		if err != nil {
			return nil, nil, err
		}
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("dispatcher: state malformed: %w", err)
		}
		for rows.Next() {
			var id string
			var b badLine
			if err := rows.Scan(&id, &b.file, &b.line); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("dispatcher: state malformed: %w", err)
			}
			held[id] = b
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("dispatcher: state malformed: %w", err)
		}
	}
	var dups []dupLine
	for i, r := range recs {
		b, ok := held[r.ID]
		switch {
		case !ok:
			idx = append(idx, i)
		case b.file == num:
			dups = append(dups, dupLine{i, &records.LineError{File: name, Line: lines[i], Reason: fmt.Sprintf("duplicate id %q (first on line %d)", r.ID, b.line)}})
		}
	}
	return idx, dups, nil
}

// insertMalformed keeps the malformed lines bad (their seqs set, with
// their lines in the file numbered num) in the state under ids unique
// across records and malformed lines, and returns those to put in the
// store: all but the ones taken in before. Callers hold mu, inside the
// state transaction.
func (d *Dispatcher) insertMalformed(ctx context.Context, bad []store.Record, lines []int, num int64) ([]store.Record, error) {
	var kept []store.Record
	var err error
	for i, r := range bad {
		var had string
		switch e := d.st.q.badAt.QueryRowContext(ctx, num, lines[i]).Scan(&had); {
		case e == nil:
			continue // taken in before
		case e != errNoRows:
			return nil, fmt.Errorf("dispatcher: state malformed: %w", e)
		}
		// A state converted from version 3 knows its malformed lines by
		// id only.
		if d.nMalformed > 0 {
			var one int
			switch e := d.st.q.badConverted.QueryRowContext(ctx, records.MalformedID(lines[i], func(string) bool { return false })).Scan(&one); {
			case e == nil:
				continue
			case e != errNoRows:
				return nil, fmt.Errorf("dispatcher: state malformed: %w", e)
			}
		}
		r.ID = records.MalformedID(lines[i], func(id string) bool {
			if err != nil {
				return false
			}
			var taken bool
			if e := d.st.q.badTaken.QueryRowContext(ctx, id).Scan(&taken); e != nil {
				err = fmt.Errorf("dispatcher: state malformed: %w", e)
			}
			return taken
		})
		if err != nil {
			return nil, err
		}
		r.Fields, r.Links, r.Order = nil, nil, nil
		if _, err := exec(ctx, d.st.q.badIns, r.ID, r.Seq, num, lines[i]); err != nil {
			return nil, err
		}
		d.nMalformed++
		kept = append(kept, r)
	}
	return kept, nil
}
