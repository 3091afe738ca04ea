package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"backfill/records"
	"backfill/store"
)

// LoadReport says what Load read.
type LoadReport struct {
	Records int // good records in the file (new and already known)
	// New counts the records not seen before: 0 when the file was taken
	// in before, and when a crash cut its intake short, those from its
	// first read on.
	New int
	Bad int // malformed lines: not crawled for, exported marked
	// NothingToFill counts the new records that had no target field
	// (none of their empty fields is one the mappings produce, nor one
	// of Config.Fields): complete from the start.
	NothingToFill int
	Errors        []error // "file:line: reason", malformed lines and ignored values; at most maxReported
}

const maxReported = records.MaxReported

// Load reads a records file (CSV with a header row, or JSON Lines) into the
// state and the store, and queues each new record's links. Loading a file
// again is harmless: records already known keep their state, so a resumed
// run calls Load with the same file, and the state remembers how far each
// file was taken in (its size and modification time, the place after the
// last record committed): a file taken in whole is not read again, and
// one cut short by a crash is read on from there. A file that cannot be
// opened, is not CSV or JSON Lines, or holds no record is an error; a
// malformed line, or a record whose id an earlier line of the file had,
// is reported in the LoadReport and kept in the store, in its place and
// marked, for export to give back (with Config.Strict, a file with any
// malformed line is refused before anything is loaded).
//
// Records are read on one goroutine while the previous batch is written
// (loadBatch); each batch of loadBatchSize records is one state
// transaction, committed after the store has the batch's records.
func (d *Dispatcher) Load(ctx context.Context, path string) (LoadReport, error) {
	var rep LoadReport
	if d.cfg.Strict {
		if err := records.Strict(path, d.cfg.ID); err != nil {
			return rep, fmt.Errorf("dispatcher: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("dispatcher: records: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("dispatcher: records: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	prog, err := d.loadProgress(ctx, abs, fi)
	if err != nil {
		return rep, err
	}
	rep.Records, rep.Bad = prog.records, prog.bad
	if prog.pos.Offset > 0 && !prog.done {
		rep.New, rep.NothingToFill = prog.fresh, prog.nothing
	}
	if prog.done {
		d.log.Info("records file taken in before; not read again", "file", path, "records", rep.Records, "bad", rep.Bad)
		d.mu.Lock()
		d.badLines += rep.Bad
		d.mu.Unlock()
		if rep.Records == 0 {
			return rep, fmt.Errorf("dispatcher: records: %s: %w: every one of its %d lines is malformed", path, records.ErrNoRecords, rep.Bad)
		}
		return rep, nil
	}
	if prog.pos.Offset > 0 {
		d.log.Info("records file taken in up to a place before; reading on from there", "file", path, "line", prog.pos.Line, "records", rep.Records)
	}
	note := func(errs []error) {
		for _, e := range errs {
			if len(rep.Errors) < maxReported {
				rep.Errors = append(rep.Errors, e)
			}
		}
	}
	filtered := make(map[string]int64) // record links refused, by reason
	err = records.ReadBatches(ctx, path, f, fi.Size(), prog.pos, loadBatchSize, d.cfg.ID, func(b *records.Batch) error {
		note(b.Errors)
		for why, n := range b.Filtered {
			filtered[why] += n
		}
		next := prog
		next.records += b.Good
		next.bad += b.Bad
		next.pos, next.done = b.End, b.EOF
		recs := make([]store.Record, len(b.Recs))
		var long map[string]string // id → its own link refused for its length
		for i, r := range b.Recs {
			recs[i] = storeRecord(r)
			if r.TooLong != "" {
				if long == nil {
					long = make(map[string]string)
				}
				long[r.ID] = r.TooLong
			}
		}
		n, none, dups, err := d.loadBatch(ctx, recs, long, b.Lines, path, abs, fi, next)
		if err != nil {
			return err
		}
		rep.New += n
		rep.NothingToFill += none
		next.records -= len(dups)
		next.bad += len(dups)
		next.fresh += n
		next.nothing += none
		for _, e := range dups {
			note([]error{e})
		}
		prog = next
		return nil
	})
	rep.Records, rep.Bad = prog.records, prog.bad
	d.mu.Lock()
	d.badLines += rep.Bad
	for why, n := range filtered {
		d.run.filtered[why] += n
	}
	d.mu.Unlock()
	if err == nil && rep.Records == 0 {
		err = fmt.Errorf("%s: %w: every one of its %d lines is malformed", path, records.ErrNoRecords, rep.Bad)
	}
	if err != nil {
		return rep, fmt.Errorf("dispatcher: records: %w", err)
	}
	d.log.Info("records loaded", "file", path, "records", rep.Records, "new", rep.New, "bad", rep.Bad)
	return rep, nil
}

// loadBatchSize is how many records loadBatch takes at a time, and
// loadCommitEvery how long their transaction stays open (a crash loses
// at most that much of the intake, which the next Load reads again).
const (
	loadBatchSize   = 4096
	loadCommitEvery = time.Second
)

// loadProg is how far a records file was taken in (the loads table):
// its good records and malformed lines read, the records new to the
// state and of those the ones with nothing to fill (LoadReport's counts,
// from the file's first read on).
type loadProg struct {
	num                          int64 // the file's number (records.file)
	pos                          records.Pos
	records, bad, fresh, nothing int
	done                         bool
}

// loadProgress reads how far the file at path (with fi's size and
// modification time) was taken in; a file that changed since starts over.
func (d *Dispatcher) loadProgress(ctx context.Context, path string, fi os.FileInfo) (loadProg, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var p loadProg
	var size, mtime int64
	var done int
	err := d.st.q.loadGet.QueryRowContext(ctx, path).Scan(&p.num, &size, &mtime, &p.pos.Offset, &p.pos.Line, &p.records, &p.bad, &p.fresh, &p.nothing, &done)
	if errors.Is(err, errNoRows) {
		if err := d.st.q.loadNum.QueryRowContext(ctx).Scan(&p.num); err != nil {
			return p, fmt.Errorf("dispatcher: state loads: %w", err)
		}
		return loadProg{num: p.num}, nil
	}
	if err != nil {
		return p, fmt.Errorf("dispatcher: state loads: %w", err)
	}
	if size != fi.Size() || mtime != fi.ModTime().UnixNano() {
		return loadProg{num: p.num}, nil // changed since: read it all again
	}
	p.done = done == 1
	return p, nil
}

// loadBatch stores the records not yet known and queues their links, in
// one state transaction that also records prog, the place the file is
// taken in to. The store gets the records before the transaction commits
// (and before any value is set on them): a crash in between leaves them
// in the store only, and the next Load puts them again (PutRecords is an
// upsert). Malformed lines (Record.Error set) go to the store too (export
// gives them back) and to the state's malformed table, never to the
// crawl; so does a record whose id another line of the same file has,
// returned as a records.LineError naming the file as name. long holds, by
// id, a record's own link refused for its length (see outcomes.go). It
// returns how many records were new and how many of those had nothing to
// fill.
func (d *Dispatcher) loadBatch(ctx context.Context, recs []store.Record, long map[string]string, lines []int, name, path string, fi os.FileInfo, prog loadProg) (n, nothingToFill int, dups []*records.LineError, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, 0, nil, errors.New("dispatcher closed")
	}
	if err := d.st.begin(ctx); err != nil {
		return 0, 0, nil, err
	}
	nRecords, nComplete, recSeq, nMalformed := d.nRecords, d.nComplete, d.recSeq, d.nMalformed
	// Every line of the batch, good or not, takes its place in the input
	// order.
	var good, bad []store.Record
	var goodLines, badLines []int
	for i := range recs {
		recs[i].Seq = d.recSeq + int64(i) + 1
		if recs[i].Error != "" {
			bad, badLines = append(bad, recs[i]), append(badLines, lines[i])
		} else {
			good, goodLines = append(good, recs[i]), append(goodLines, lines[i])
		}
	}
	d.recSeq += int64(len(recs))
	fresh, dupLines, err := d.insertRecords(ctx, good, long, goodLines, prog.num, name)
	for _, dl := range dupLines {
		dups = append(dups, dl.err)
		r := good[dl.i]
		bad = append(bad, store.Record{Seq: r.Seq, Format: r.Format, Raw: r.Raw, Error: dl.err.Error()})
		badLines = append(badLines, goodLines[dl.i])
	}
	var kept []store.Record
	if err == nil {
		kept, err = d.insertMalformed(ctx, bad, badLines, prog.num)
	}
	for _, r := range fresh {
		if r.complete {
			nothingToFill++
		}
	}
	// The store takes the new records on its own connection meanwhile.
	stored := make(chan error, 1)
	if err == nil {
		put := make([]store.Record, 0, len(fresh)+len(kept))
		for _, r := range fresh {
			put = append(put, r.Record)
		}
		go func() { stored <- d.cfg.Store.PutRecords(ctx, append(put, kept...)) }()
	} else {
		stored <- nil
	}
	if err == nil {
		err = d.flush(ctx)
	}
	if err == nil {
		_, err = exec(ctx, d.st.q.loadPut, path, prog.num, fi.Size(), fi.ModTime().UnixNano(), prog.pos.Offset, prog.pos.Line,
			prog.records-len(dups), prog.bad+len(dups), prog.fresh+len(fresh), prog.nothing+nothingToFill, b2i(prog.done))
	}
	// The store gets the records before any value is set on them, and
	// before the state says they are taken in.
	if serr := <-stored; serr != nil && err == nil {
		err = fmt.Errorf("dispatcher: store records: %w", serr)
	}
	// Batches share a transaction for up to loadCommitEvery: a commit
	// writes every page the batch changed, and the next batch changes
	// many of the same pages again.
	if err == nil && (prog.done || time.Since(d.st.txStart) >= loadCommitEvery) {
		err = d.commitState(ctx)
	}
	if err != nil {
		d.abandon()
		d.recSeq, d.nRecords, d.nComplete, d.nMalformed = recSeq, nRecords, nComplete, nMalformed
		return 0, 0, nil, err
	}
	return len(fresh), nothingToFill, dups, nil
}

// storeRecord is r as the store keeps it.
func storeRecord(r records.Record) store.Record {
	return store.Record{ID: r.ID, Seq: r.Seq, Format: r.Format, Raw: r.Raw, Fields: r.Fields, Order: r.Order, Links: r.Links, Error: r.Error}
}
