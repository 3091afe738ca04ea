package dispatcher

import (
	"fmt"
	"os"

	"backfill/store"
)

// ReadRecords reads a records file as Load does (CSV or JSON Lines, the
// same ids, links and checks) without a crawl, for the tools that need
// the user's records themselves (mappings learn). fn gets each good
// record in file order; malformed lines and ignored values are counted
// and reported in the LoadReport as Load reports them.
func ReadRecords(path string, fn func(store.Record) error) (LoadReport, error) {
	var rep LoadReport
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("records: %w", err)
	}
	defer f.Close()
	report := func(e *LineError) {
		if len(rep.Errors) < maxReported {
			rep.Errors = append(rep.Errors, e)
		}
	}
	err = readRecords(path, f, FormatAuto, func(r store.Record) error {
		if r.Error != "" {
			return nil // a malformed line: reported, and it has no values
		}
		rep.Records++
		return fn(r)
	}, func(e *LineError) {
		rep.Bad++
		report(e)
	}, report)
	if err != nil {
		return rep, fmt.Errorf("records: %w", err)
	}
	return rep, nil
}
