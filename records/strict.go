package records

import (
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"strings"
)

// Strict reads path through as a load would and refuses it if any line
// is malformed, a duplicate id included, listing them (up to
// MaxReported) in file order.
func Strict(path string, id ID) error {
	var lines []string
	n, err := strictScan(path, id, func(e *LineError) {
		if len(lines) < MaxReported {
			lines = append(lines, e.Error())
		}
	})
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if n > 0 {
		more := ""
		if n > len(lines) {
			more = fmt.Sprintf("\n  … and %d more", n-len(lines))
		}
		return fmt.Errorf("records: %s: %d malformed line(s); nothing loaded (strict):\n  %s%s",
			path, n, strings.Join(lines, "\n  "), more)
	}
	return nil
}

// strictScan reads path through as Load would and reports the malformed
// lines, a duplicate id included, in file order (the first MaxReported),
// returning how many there are. It keeps no set of the ids: a first pass keeps an 8-byte hash of each, and
// only if two hashes are equal does a second pass look at the ids whose
// hashes are.
func strictScan(path string, id ID, report func(*LineError)) (int, error) {
	seed := maphash.MakeSeed()
	var hashes []uint64
	var errs []*LineError
	n := 0
	bad := func(e *LineError) {
		n++
		if len(errs) < MaxReported {
			errs = append(errs, e)
		}
	}
	err := scanRecords(path, id, nil, func(r Record) {
		hashes = append(hashes, maphash.String(seed, r.ID))
	}, bad)
	if err != nil {
		return 0, err
	}
	slices.Sort(hashes)
	twice := make(map[uint64]bool)
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			twice[hashes[i]] = true
		}
	}
	hashes = nil
	if len(twice) > 0 {
		errs, n = errs[:0], 0
		err = scanRecords(path, id, func(id string) bool { return twice[maphash.String(seed, id)] }, func(Record) {}, bad)
		if err != nil {
			return 0, err
		}
	}
	for _, e := range errs {
		report(e)
	}
	return n, nil
}

// scanRecords reads path, calling rec for every record and bad for every
// malformed line; the ids track says to are checked for duplicates.
func scanRecords(path string, id ID, track func(id string) bool, rec func(Record), bad func(*LineError)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ids map[string]int
	if track != nil {
		ids = make(map[string]int)
	}
	return readAll(path, f, nil, Pos{}, FormatAuto, id, ids, track, func(r Record, _ int, _ Pos) error {
		rec(r)
		return nil
	}, bad, func(*LineError) {})
}
