package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"backfill/records"
)

// ExportOptions says how Export writes the records.
type ExportOptions struct {
	// Format is "jsonl" (the default when empty) or "csv".
	Format string
	// Provenance adds where each found value came from: a "provenance"
	// object per JSON line (which implies Wrap), or "<field>.source",
	// "<field>.mapping", "<field>.depth" and "<field>.at" columns after
	// each CSV column that has any found value.
	Provenance bool
	// Wrap writes each JSON line as {"id":…,"fields":{…}} (the record's
	// own object in "fields"), instead of the user's own line with only
	// the filled fields changed.
	Wrap bool
	// Fields are target fields to write even where the input lacks them,
	// after the input's own columns, so that a field nothing was found for
	// still gets its (empty) column.
	Fields []string
	// Member, when set, keeps only the values that cluster member gave
	// (Value.Member or MemberKey), and only the records holding one: one
	// member's answers, to review before purging them.
	Member string
}

// Export writes every record of r, filled or not, in Seq order: the input's
// columns in their order, then opts.Fields, then any other field backfill
// found. A value backfill found fills its field; otherwise the input's value
// stands, exactly as given: from a record's Raw text, a CSV cell byte for
// byte, a JSON Lines value with its JSON type and text (numbers as written,
// lists, objects, booleans, null). A filled value is written with the type
// its mapping field declares: a "number" field as a JSON number, a "list"
// field as a JSON array of its "; "-separated values, anything else as a
// string. A missing CSV value is null in JSON Lines and empty in CSV.
//
// A JSON line is the user's own: a JSON Lines record's line as written
// (keys, order, spacing) with only the filled values changed and the
// fields it lacked appended, so that the export can replace the input
// file; a CSV record's line is the object of its columns. With Wrap (or
// Provenance) each line is {"id":…,"fields":{…}} instead, the object in
// "fields".
//
// A malformed input line (Record.Error) keeps its place: in JSON Lines as
// {"_backfill_error":…,"_backfill_input":…} (wrapped:
// {"id":…,"fields":null,"_backfill_error":…,"_backfill_input":…}), with
// "_backfill_input_base64" when the line is not UTF-8, which a JSON string
// cannot carry; in CSV with its text in the _backfill_input column and
// the reason in _backfill_error, the other columns empty. With Provenance,
// a record left incomplete carries why (Record.Outcome): an "outcome"
// object per JSON line, a _backfill_outcome column in CSV (none for a
// record a stopped run had not reached).
//
// JSON Lines is written in one pass as the records stream by. CSV needs its
// header first, so it reads the records twice: once for the set of columns
// (memory grows with the number of distinct field names, not of records) and
// once for the rows. If the store gains a field between the two passes the
// export fails with an error naming the record rather than drop the value.
func Export(ctx context.Context, r Records, w io.Writer, opts ExportOptions) error {
	if opts.Member != "" {
		r = memberRecords{r, opts.Member}
	}
	switch opts.Format {
	case "", "jsonl":
		return exportJSONL(ctx, r, w, opts)
	case "csv":
		return exportCSV(ctx, r, w, opts)
	}
	return fmt.Errorf("store: export: unknown format %q (want jsonl or csv)", opts.Format)
}

// memberRecords are the records of r holding a value member gave, with
// those values alone (ExportOptions.Member).
type memberRecords struct {
	all    Records
	member string
}

func (m memberRecords) PutRecords(ctx context.Context, recs []Record) error {
	return m.all.PutRecords(ctx, recs)
}

func (m memberRecords) SetFields(ctx context.Context, id string, vals []Value) error {
	return m.all.SetFields(ctx, id, vals)
}

func (m memberRecords) SetOutcomes(ctx context.Context, outs []Outcome) error {
	return m.all.SetOutcomes(ctx, outs)
}

func (m memberRecords) Record(ctx context.Context, id string) (Record, error) {
	return m.all.Record(ctx, id)
}

func (m memberRecords) Records(ctx context.Context, fn func(Record) error) error {
	return m.all.Records(ctx, func(rec Record) error {
		var found map[string]Value
		for f, v := range rec.Found {
			if v.Member == m.member || v.MemberKey == m.member {
				if found == nil {
					found = make(map[string]Value)
				}
				found[f] = v
			}
		}
		if found == nil {
			return nil
		}
		rec.Found = found
		return fn(rec)
	})
}

// The columns and keys export adds to mark what is not the user's data.
const (
	ColumnError   = "_backfill_error"   // why an input line was malformed
	ColumnInput   = "_backfill_input"   // the malformed line as read
	ColumnOutcome = "_backfill_outcome" // CSV with provenance: why a record was left incomplete
	keyInput64    = "_backfill_input_base64"
)

// fieldValue is what an export shows for field f of rec as text: a value
// found by backfill, else the input's value (in, from inputValues). ok is
// false when the field is missing.
func fieldValue(rec Record, in map[string]string, f string) (v string, ok bool) {
	if fv, found := rec.Found[f]; found && fv.Value != "" {
		return fv.Value, true
	}
	v = in[f]
	return v, v != ""
}

// inputValues returns a record's input values as text, exactly as given: a
// CSV cell, or for JSON Lines a string's content, any other value's JSON
// text and "" for null. Without Raw (a record of an earlier build) they
// are its Fields.
func inputValues(rec Record) (map[string]string, error) {
	if rec.Raw == nil || rec.Error != "" {
		return rec.Fields, nil
	}
	out := make(map[string]string, len(rec.Order))
	switch rec.Format {
	case FormatCSV:
		cells, err := records.SplitCSVRecord(rec.Raw)
		if err != nil {
			return nil, fmt.Errorf("stored input: %w", err)
		}
		if len(cells) != len(rec.Order) {
			return nil, fmt.Errorf("stored input has %d cells for %d columns", len(cells), len(rec.Order))
		}
		for i, c := range cells {
			out[rec.Order[i]] = c
		}
	case FormatJSONL:
		members, _, err := records.JSONMembers(rec.Raw)
		if err != nil {
			return nil, fmt.Errorf("stored input: %w", err)
		}
		for _, m := range members {
			switch m.Value[0] {
			case '"':
				var s string
				if err := json.Unmarshal(m.Value, &s); err != nil {
					return nil, fmt.Errorf("stored input: key %q: %w", m.Key, err)
				}
				out[m.Key] = s
			case 'n': // null
				out[m.Key] = ""
			default:
				out[m.Key] = string(m.Value)
			}
		}
	default:
		return rec.Fields, nil
	}
	return out, nil
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
	lw := NewLineWriter(bw, opts)
	err := r.Records(ctx, func(rec Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return lw.Write(rec)
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
	// Via lists the URLs that redirected to Source, first to last; left
	// out when the page was reached as it is. Member is the cluster
	// member that fetched Source, MemberKey its public key.
	Via       []string `json:"via,omitempty"`
	Member    string   `json:"member,omitempty"`
	MemberKey string   `json:"member_key,omitempty"`
	// TLSError is the certificate problem of Source's connection, fetched
	// anyway under --insecure-tls; left out when there was none.
	TLSError string `json:"tls_error,omitempty"`
}

func provenanceOf(v Value) provenanceJSON {
	p := provenanceJSON{
		Value:     v.Value,
		Source:    v.Source,
		Mapping:   v.Mapping,
		Depth:     v.Depth,
		At:        v.At.UTC().Format(time.RFC3339Nano),
		Conflicts: make([]conflictJSON, len(v.Conflicts)),
		Via:       v.Via,
		Member:    v.Member,
		MemberKey: v.MemberKey,
		TLSError:  v.TLSError,
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

// str appends s as a JSON string.
func (e *jsonlEncoder) str(s string) error { return e.value(s) }

// typed appends a found value with the JSON type its field declares.
func (e *jsonlEncoder) typed(v Value) error {
	switch v.Type {
	case "number":
		if isJSONNumber(v.Value) {
			e.buf.WriteString(v.Value)
			return nil
		}
	case "list":
		return e.value(strings.Split(v.Value, "; "))
	}
	return e.value(v.Value)
}

// isJSONNumber reports whether s is a JSON number as written (no leading
// zeros, no "+", no hex), so that it can be written as one unchanged.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// encode returns rec's line, valid until the next call.
func (e *jsonlEncoder) encode(rec Record) ([]byte, error) {
	e.buf.Reset()
	if !e.opts.Wrap && !e.opts.Provenance {
		return e.plain(rec)
	}
	e.buf.WriteString(`{"id":`)
	if err := e.str(rec.ID); err != nil {
		return nil, err
	}
	if rec.Error != "" {
		e.buf.WriteString(`,"fields":null,`)
		if err := e.malformed(rec); err != nil {
			return nil, err
		}
		e.buf.WriteString("}\n")
		return e.buf.Bytes(), nil
	}
	cols := columns(rec, e.opts.Fields)
	e.buf.WriteString(`,"fields":`)
	if rec.Format == FormatJSONL && rec.Raw != nil {
		if err := e.spliced(rec, cols); err != nil {
			return nil, err
		}
	} else if err := e.object(rec, cols); err != nil {
		return nil, err
	}
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
			if err := e.str(f); err != nil {
				return nil, err
			}
			e.buf.WriteByte(':')
			if err := e.value(provenanceOf(v)); err != nil {
				return nil, err
			}
		}
		e.buf.WriteByte('}')
		if rec.Outcome != nil {
			e.buf.WriteString(`,"outcome":`)
			if err := e.value(toOutcomeJSON(*rec.Outcome)); err != nil {
				return nil, err
			}
		}
	}
	e.buf.WriteString("}\n")
	return e.buf.Bytes(), nil
}

// plain writes rec's line as the user's own: a JSON Lines record's line
// as written (the text around its object too) with only the found values
// put in, any other record as the object of its fields, and a malformed
// line as an object of its reason and text alone.
func (e *jsonlEncoder) plain(rec Record) ([]byte, error) {
	if rec.Error != "" {
		e.buf.WriteByte('{')
		if err := e.malformed(rec); err != nil {
			return nil, err
		}
		e.buf.WriteString("}\n")
		return e.buf.Bytes(), nil
	}
	cols := columns(rec, e.opts.Fields)
	if rec.Format != FormatJSONL || rec.Raw == nil {
		if err := e.object(rec, cols); err != nil {
			return nil, err
		}
		e.buf.WriteByte('\n')
		return e.buf.Bytes(), nil
	}
	// Only white space can stand around the object (JSONMembers refuses
	// anything else).
	lead := rec.Raw[:max(bytes.IndexByte(rec.Raw, '{'), 0)]
	trail := rec.Raw[len(bytes.TrimRight(rec.Raw, " \t\r\n")):]
	e.buf.Write(lead)
	if err := e.spliced(rec, cols); err != nil {
		return nil, err
	}
	e.buf.Write(trail)
	e.buf.WriteByte('\n')
	return e.buf.Bytes(), nil
}

// malformed writes the members that mark a malformed line: its reason,
// and its text as read (base64 when it is not UTF-8, which a JSON string
// cannot carry; none when it was too long to keep).
func (e *jsonlEncoder) malformed(rec Record) error {
	e.buf.WriteString(`"` + ColumnError + `":`)
	if err := e.str(rec.Error); err != nil {
		return err
	}
	switch {
	case rec.Raw == nil:
		return nil
	case utf8.Valid(rec.Raw):
		e.buf.WriteString(`,"` + ColumnInput + `":`)
		return e.str(string(rec.Raw))
	}
	e.buf.WriteString(`,"` + keyInput64 + `":`)
	return e.str(base64.StdEncoding.EncodeToString(rec.Raw))
}

// object writes the fields of a record whose values are text (CSV input,
// or a record stored without Raw): a found value with its type, an input
// value as a string, a missing one as null.
func (e *jsonlEncoder) object(rec Record, cols []string) error {
	in, err := inputValues(rec)
	if err != nil {
		return err
	}
	e.buf.WriteByte('{')
	for i, f := range cols {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if err := e.str(f); err != nil {
			return err
		}
		e.buf.WriteByte(':')
		if fv, found := rec.Found[f]; found && fv.Value != "" {
			err = e.typed(fv)
		} else if v := in[f]; v != "" {
			err = e.str(v)
		} else {
			e.buf.WriteString("null")
		}
		if err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// spliced writes a JSON Lines record's own object as the user wrote it,
// with only the found values put in (in place, or appended with the other
// columns the input lacks).
func (e *jsonlEncoder) spliced(rec Record, cols []string) error {
	members, _, err := records.JSONMembers(rec.Raw)
	if err != nil {
		return fmt.Errorf("stored input: %w", err)
	}
	inInput := make(map[string]bool, len(members))
	for _, m := range members {
		inInput[m.Key] = true
	}
	set := map[string][]byte{}
	var add []string
	var addVals [][]byte
	mark := e.buf.Len()
	for _, f := range cols {
		fv, found := rec.Found[f]
		found = found && fv.Value != ""
		if inInput[f] && !found {
			continue
		}
		at := e.buf.Len()
		if found {
			err = e.typed(fv)
		} else {
			e.buf.WriteString("null")
		}
		if err != nil {
			return err
		}
		v := append([]byte(nil), e.buf.Bytes()[at:]...)
		e.buf.Truncate(at)
		if inInput[f] {
			set[f] = v
			continue
		}
		k := e.buf.Len()
		if err := e.str(f); err != nil {
			return err
		}
		add = append(add, string(e.buf.Bytes()[k:]))
		addVals = append(addVals, v)
		e.buf.Truncate(k)
	}
	e.buf.Truncate(mark)
	out, err := records.SpliceJSON(rec.Raw, set, add, addVals)
	if err != nil {
		return fmt.Errorf("stored input: %w", err)
	}
	e.buf.Write(out)
	return nil
}

// provColumns are the columns CSV provenance adds after a found field's
// own, suffixed to its name, in this order: the page the value came from,
// the mapping, the link depth of the page, when it was found (RFC 3339,
// UTC), the URLs that redirected to the page (first to last, separated by
// spaces, which a URL never holds) and the member that fetched it, as a
// JSON line's provenance object has them; then, when some value's page
// had one, the certificate problem of its connection, fetched under
// --insecure-tls (provTLSColumn).
var provColumns = []string{".source", ".mapping", ".depth", ".at", ".via", ".member"}

const provTLSColumn = ".tls_error"

// csvLayout is the CSV header: the columns every row has, and which of them
// carry provenance columns.
type csvLayout struct {
	cols      []string
	known     map[string]bool
	prov      map[string]bool // only when provenance is asked for
	malformed bool            // the _backfill_error and _backfill_input columns
	tls       bool            // provenance has provTLSColumn: a value's page had a certificate problem
	outcome   bool            // the _backfill_outcome column
	header    []string
}

// scanCSVLayout is the first CSV pass.
func scanCSVLayout(ctx context.Context, r Records, opts ExportOptions) (*csvLayout, error) {
	var input, foundOnly []string
	inInput, inFound := map[string]bool{}, map[string]bool{}
	prov := map[string]bool{}
	l := &csvLayout{known: map[string]bool{}}
	err := r.Records(ctx, func(rec Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rec.Error != "" {
			l.malformed = true
		}
		if rec.Outcome != nil && opts.Provenance {
			l.outcome = true
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
			l.tls = l.tls || rec.Found[f].TLSError != ""
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
			for _, suffix := range provColumns {
				l.header = append(l.header, f+suffix)
			}
			if l.tls {
				l.header = append(l.header, f+provTLSColumn)
			}
		}
	}
	if l.outcome {
		l.header = append(l.header, ColumnOutcome)
	}
	if l.malformed {
		l.header = append(l.header, ColumnError, ColumnInput)
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
	if (rec.Error != "" && !l.malformed) || (rec.Outcome != nil && l.prov != nil && !l.outcome) {
		return fmt.Errorf("record %q: appeared after the header was written (the store changed during export)", rec.ID)
	}
	n := len(dst)
	if l.malformed {
		n -= 2
		if rec.Error != "" {
			dst[n], dst[n+1] = rec.Error, string(rec.Raw)
			return nil // the user's line is in _backfill_input, as read
		}
	}
	if l.outcome && rec.Outcome != nil {
		dst[n-1] = outcomeText(*rec.Outcome)
	}
	in, err := inputValues(rec)
	if err != nil {
		return fmt.Errorf("record %q: %w", rec.ID, err)
	}
	i := 0
	for _, f := range l.cols {
		dst[i], _ = fieldValue(rec, in, f)
		i++
		if l.prov[f] {
			if fv, found := rec.Found[f]; found {
				dst[i], dst[i+1], dst[i+2], dst[i+3] = fv.Source, fv.Mapping, strconv.Itoa(fv.Depth), fv.At.UTC().Format(time.RFC3339Nano)
				dst[i+4], dst[i+5] = strings.Join(fv.Via, " "), fv.Member
				if l.tls {
					dst[i+6] = fv.TLSError
				}
			}
			i += len(provColumns) + b2i(l.tls)
		}
	}
	return nil
}

// outcomeText is an Outcome in one CSV cell: "reason: detail".
func outcomeText(o Outcome) string {
	if o.Detail == "" {
		return o.Reason
	}
	return o.Reason + ": " + o.Detail
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

// LineWriter writes records one at a time as Export's JSON Lines do, for
// a stream of records as they are settled. Not safe for concurrent use.
type LineWriter struct {
	w   io.Writer
	enc *jsonlEncoder
}

// NewLineWriter returns a LineWriter on w; opts.Format is ignored.
func NewLineWriter(w io.Writer, opts ExportOptions) *LineWriter {
	return &LineWriter{w: w, enc: newJSONLEncoder(opts)}
}

// Write writes rec's line.
func (l *LineWriter) Write(rec Record) error {
	line, err := l.enc.encode(rec)
	if err != nil {
		return fmt.Errorf("record %q: %w", rec.ID, err)
	}
	_, err = l.w.Write(line)
	return err
}
