package survey

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
)

// Output formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
)

// output writes rows as they are committed: JSON Lines (each row as
// stored) or CSV (a header, then a line per row). Every batch is flushed,
// so a consumer reading a pipe or tailing the file sees rows as they
// arrive.
type output struct {
	job    string
	format string
	bw     *bufio.Writer
	cw     *csv.Writer
	header bool
}

func newOutput(w io.Writer, format, job string) (*output, error) {
	if w == nil {
		return nil, nil
	}
	o := &output{job: job, format: format, bw: bufio.NewWriter(w)}
	switch format {
	case FormatJSONL, "":
		o.format = FormatJSONL
	case FormatCSV:
		o.cw = csv.NewWriter(o.bw)
	default:
		return nil, fmt.Errorf("survey: output format %q: want %s or %s", format, FormatJSONL, FormatCSV)
	}
	return o, nil
}

func (o *output) write(rows []row) error {
	if o == nil {
		return nil
	}
	for _, r := range rows {
		if o.cw == nil {
			o.bw.Write(r.doc)
			o.bw.WriteByte('\n')
			continue
		}
		if !o.header {
			o.header = true
			o.cw.Write(csvHeader(o.job))
		}
		rec, err := csvRow(o.job, r.doc)
		if err != nil {
			return fmt.Errorf("survey: output row %s: %w", r.key, err)
		}
		o.cw.Write(rec)
	}
	if o.cw != nil {
		o.cw.Flush()
		if err := o.cw.Error(); err != nil {
			return fmt.Errorf("survey: output: %w", err)
		}
	}
	if err := o.bw.Flush(); err != nil {
		return fmt.Errorf("survey: output: %w", err)
	}
	return nil
}
