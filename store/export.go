package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// ExportOptions says how Export writes the records.
type ExportOptions struct {
	// Format is "jsonl" (the default when empty) or "csv".
	Format string
	// Provenance adds where each found value came from: a "provenance"
	// object per JSON line, or "<field>.source" and "<field>.mapping"
	// columns after each CSV column that has any found value.
	Provenance bool
	// Fields are target fields to write even where the input lacks them,
	// after the input's own columns, so that a field nothing was found for
	// still gets its (empty) column.
	Fields []string
}

// Export writes every record of r, filled or not, in Seq order: the input's
// columns in their order, then opts.Fields, then any other field backfill
// found. A value backfill found fills its field; otherwise the input's value
// stands. A missing value is null in JSON Lines and empty in CSV.
//
// JSON Lines is written in one pass as the records stream by. CSV needs its
// header first, so it reads the records twice: once for the set of columns
// (memory grows with the number of distinct field names, not of records) and
// once for the rows. If the store gains a field between the two passes the
// export fails with an error naming the record rather than drop the value.
func Export(ctx context.Context, r Records, w io.Writer, opts ExportOptions) error {
	switch opts.Format {
	case "", "jsonl":
		return exportJSONL(ctx, r, w, opts)
	case "csv":
		return exportCSV(ctx, r, w, opts)
	}
	return fmt.Errorf("store: export: unknown format %q (want jsonl or csv)", opts.Format)
}

// fieldValue is what an export shows for field f of rec: a value found by
// backfill, else the input's value. ok is false when the field is missing.
func fieldValue(rec Record, f string) (v string, ok bool) {
	if fv, found := rec.Found[f]; found && fv.Value != "" {
		return fv.Value, true
	}
	v = rec.Fields[f]
	return v, v != ""
}

// columns lists the fields one record exports, in order: its input order,
// input fields missing from that order (sorted), extra, then fields only
// backfill knows (sorted).
func columns(rec Record, extra []string) []string {
	seen := make(map[string]bool, len(rec.Order)+len(extra)+len(rec.Found))
	var cols []string
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			cols = append(cols, f)
		}
	}
	for _, f := range rec.Order {
		add(f)
	}
	for _, f := range sortedKeys(rec.Fields) {
		add(f)
	}
	for _, f := range extra {
		add(f)
	}
	for _, f := range sortedKeys(rec.Found) {
		add(f)
	}
	return cols
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func exportJSONL(ctx context.Context, r Records, w io.Writer, opts ExportOptions) error {
	bw := bufio.NewWriter(w)
	enc := newJSONLEncoder(opts)
	err := r.Records(ctx, func(rec Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := enc.encode(rec)
		if err != nil {
			return fmt.Errorf("record %q: %w", rec.ID, err)
		}
		_, err = bw.Write(line)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: export jsonl: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store: export jsonl: %w", err)
	}
	return nil
}

// jsonlEncoder writes one record as one JSON line. The objects are written
// key by key because encoding/json would sort map keys, and the point is to
// keep the input's column order.
type jsonlEncoder struct {
	opts ExportOptions
	buf  bytes.Buffer
	enc  *json.Encoder
}

func newJSONLEncoder(opts ExportOptions) *jsonlEncoder {
	e := &jsonlEncoder{opts: opts}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false) // values are data, not HTML to embed
	return e
}

type provenanceJSON struct {
	Value     string         `json:"value"`
	Source    string         `json:"source"`
	Mapping   string         `json:"mapping"`
	Depth     int            `json:"depth"`
	At        string         `json:"at"`
	Conflicts []conflictJSON `json:"conflicts"`
	// History is what the field held before refreshes replaced it,
	// oldest first; left out when a refresh never changed the field.
	History []priorJSON `json:"history,omitempty"`
}

func provenanceOf(v Value) provenanceJSON {
	p := provenanceJSON{
		Value:     v.Value,
		Source:    v.Source,
		Mapping:   v.Mapping,
		Depth:     v.Depth,
		At:        v.At.UTC().Format(time.RFC3339Nano),
		Conflicts: make([]conflictJSON, len(v.Conflicts)),
	}
	for i, c := range v.Conflicts {
		p.Conflicts[i] = conflictJSON(c)
	}
	for _, h := range v.History {
		p.History = append(p.History, priorJSON{Value: h.Value, Source: h.Source, Mapping: h.Mapping, Depth: h.Depth,
			At: h.At.UTC().Format(time.RFC3339Nano), Replaced: h.Replaced.UTC().Format(time.RFC3339Nano)})
	}
	return p
}

// value appends v as JSON, without the newline json.Encoder adds.
func (e *jsonlEncoder) value(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.buf.Truncate(e.buf.Len() - 1)
	return nil
}

// encode returns rec's line, valid until the next call.
func (e *jsonlEncoder) encode(rec Record) ([]byte, error) {
	e.buf.Reset()
	cols := columns(rec, e.opts.Fields)
	e.buf.WriteString(`{"id":`)
	if err := e.value(rec.ID); err != nil {
		return nil, err
	}
	e.buf.WriteString(`,"fields":{`)
	for i, f := range cols {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.value(f); err != nil {
			return nil, err
		}
		e.buf.WriteByte(':')
		if v, ok := fieldValue(rec, f); ok {
			if err := e.value(v); err != nil {
				return nil, err
			}
		} else {
			e.buf.WriteString("null")
		}
	}
	e.buf.WriteByte('}')
	if e.opts.Provenance {
		e.buf.WriteString(`,"provenance":{`)
		n := 0
		for _, f := range cols {
			v, ok := rec.Found[f]
			if !ok {
				continue
			}
			if n > 0 {
				e.buf.WriteByte(',')
			}
			n++
			if err := e.value(f); err != nil {
				return nil, err
			}
			e.buf.WriteByte(':')
			if err := e.value(provenanceOf(v)); err != nil {
				return nil, err
			}
		}
		e.buf.WriteByte('}')
	}
	e.buf.WriteString("}\n")
	return e.buf.Bytes(), nil
}

// csvLayout is the CSV header: the columns every row has, and which of them
// carry provenance columns.
type csvLayout struct {
	cols   []string
	known  map[string]bool
	prov   map[string]bool // only when provenance is asked for
	header []string
}

// scanCSVLayout is the first CSV pass.
func scanCSVLayout(ctx context.Context, r Records, opts ExportOptions) (*csvLayout, error) {
	var input, foundOnly []string
	inInput, inFound := map[string]bool{}, map[string]bool{}
	prov := map[string]bool{}
	err := r.Records(ctx, func(rec Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, f := range rec.Order {
			if !inInput[f] {
				inInput[f] = true
				input = append(input, f)
			}
		}
		for _, f := range sortedKeys(rec.Fields) {
			if !inInput[f] {
				inInput[f] = true
				input = append(input, f)
			}
		}
		for _, f := range sortedKeys(rec.Found) {
			prov[f] = true
			if !inFound[f] {
				inFound[f] = true
				foundOnly = append(foundOnly, f)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := &csvLayout{known: map[string]bool{}}
	for _, group := range [][]string{input, opts.Fields, foundOnly} {
		for _, f := range group {
			if !l.known[f] {
				l.known[f] = true
				l.cols = append(l.cols, f)
			}
		}
	}
	if opts.Provenance {
		l.prov = prov
	}
	for _, f := range l.cols {
		l.header = append(l.header, f)
		if l.prov[f] {
			l.header = append(l.header, f+".source", f+".mapping")
		}
	}
	return l, nil
}

// row fills dst (len(l.header)) with rec's row. It fails when rec has a field
// the layout lacks, which only happens if the store changed between passes.
func (l *csvLayout) row(rec Record, dst []string) error {
	for f, v := range rec.Fields {
		if v != "" && !l.known[f] {
			return fmt.Errorf("record %q: field %q appeared after the header was written (the store changed during export)", rec.ID, f)
		}
	}
	for f := range rec.Found {
		if !l.known[f] || (l.prov != nil && !l.prov[f]) {
			return fmt.Errorf("record %q: found field %q appeared after the header was written (the store changed during export)", rec.ID, f)
		}
	}
	i := 0
	for _, f := range l.cols {
		dst[i], _ = fieldValue(rec, f)
		i++
		if l.prov[f] {
			fv := rec.Found[f]
			dst[i], dst[i+1] = fv.Source, fv.Mapping
			i += 2
		}
	}
	return nil
}

func exportCSV(ctx context.Context, r Records, w io.Writer, opts ExportOptions) error {
	l, err := scanCSVLayout(ctx, r, opts)
	if err != nil {
		return fmt.Errorf("store: export csv: %w", err)
	}
	if len(l.header) == 0 {
		return nil // no records and no fields asked for: nothing to write
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(l.header); err != nil {
		return fmt.Errorf("store: export csv: %w", err)
	}
	row := make([]string, len(l.header))
	err = r.Records(ctx, func(rec Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		clear(row)
		if err := l.row(rec, row); err != nil {
			return err
		}
		return cw.Write(row)
	})
	if err != nil {
		return fmt.Errorf("store: export csv: %w", err)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("store: export csv: %w", err)
	}
	return nil
}
