package records

import (
	"context"
	"io"
	"os"
	"sync"
)

// Batch is a run of consecutive records of a file, good and malformed in
// file order, as a load takes them in: each with the line it starts on,
// the place after the last (where a resumed read starts), the problems
// reported on its lines, and EOF on the last one of the file (End is
// then the file's size).
type Batch struct {
	Recs  []Record
	Lines []int
	Good  int // records without Error
	Bad   int // malformed lines
	End   Pos
	EOF   bool
	// Errors are the malformed lines and the values ignored on kept
	// records, in file order; Filtered counts the latter by the filter
	// (LineError.Filter) that refused them.
	Errors   []error
	Filtered map[string]int64

	bytes int // of the records' text
}

// batchBytes bounds a batch's records' text, whatever their number: a
// few records near MaxKeptBytes fill one.
const batchBytes = 64 << 20

// ReadBatches reads the records file f (named name) from the place from
// on (the zero Pos: from the start) and hands fn batches of up to size
// records, in order, on the caller's goroutine, while the next batch is
// parsed on another: a load writes one batch while the next is read.
// A batch also ends once its records' text reaches batchBytes.
// Ids come from id (ID). It
// stops at the end of the file, at fn's first error (which it returns),
// or when ctx is done. fileSize is the file's size as the caller saw it,
// the last batch's End.
func ReadBatches(ctx context.Context, name string, f *os.File, fileSize int64, from Pos, size int, id ID, fn func(*Batch) error) error {
	var rest io.Reader
	if from.Offset > 0 {
		rf, err := os.Open(f.Name())
		if err != nil {
			return err
		}
		defer rf.Close()
		if _, err := rf.Seek(from.Offset, io.SeekStart); err != nil {
			return err
		}
		rest = rf
	}
	batches := make(chan *Batch, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(batches)
		b := &Batch{}
		send := func() bool {
			select {
			case batches <- b:
				b = &Batch{}
				return true
			case <-rctx.Done():
				return false
			}
		}
		readErr = ReadFrom(name, f, rest, from, FormatAuto, id, func(r Record, line int, end Pos) error {
			b.Recs, b.Lines, b.End = append(b.Recs, r), append(b.Lines, line), end
			if r.Error == "" {
				b.Good++
			}
			b.bytes += len(r.Raw)
			if (len(b.Recs) >= size || b.bytes >= batchBytes) && !send() {
				return rctx.Err()
			}
			return nil
		}, func(e *LineError) {
			b.Bad++
			b.Errors = append(b.Errors, e)
		}, func(e *LineError) {
			if e.Filter != "" {
				if b.Filtered == nil {
					b.Filtered = make(map[string]int64)
				}
				b.Filtered[e.Filter]++
			}
			b.Errors = append(b.Errors, e)
		})
		if readErr == nil {
			b.EOF, b.End = true, Pos{Offset: fileSize}
			send()
		}
	})
	var err error
	for b := range batches {
		if err != nil {
			continue // drain: the reader is stopping
		}
		if err = fn(b); err == nil {
			err = ctx.Err()
		}
		if err != nil {
			stop() // the reader stops at its next record
		}
	}
	wg.Wait()
	if err == nil {
		err = readErr
	}
	return err
}
