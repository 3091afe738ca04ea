package records

import (
	"fmt"
	"os"
)

// MaxReported bounds the problems a Report (and a load's report) lists;
// the counts go on.
const MaxReported = 1000

// Report is what reading a records file found: its good records and its
// malformed lines, counted, and the first MaxReported problems
// ("file:line: reason", malformed lines and ignored values).
type Report struct {
	Records int
	Bad     int
	Errors  []error
}

// ReadFile reads a records file as a crawl's load does (CSV or JSON
// Lines, the same ids, links and checks, duplicate ids included), for the
// tools that need the user's records themselves (mappings learn). fn gets
// each good record in file order; malformed lines and ignored values are
// counted and reported.
func ReadFile(path string, id ID, fn func(Record) error) (Report, error) {
	var rep Report
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("records: %w", err)
	}
	defer f.Close()
	report := func(e *LineError) {
		if len(rep.Errors) < MaxReported {
			rep.Errors = append(rep.Errors, e)
		}
	}
	err = Read(path, f, FormatAuto, id, func(r Record) error {
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
