package dispatcher

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"backfill/etl"
	"backfill/store"
)

// Format is the layout of a records file.
type Format int

const (
	FormatAuto  Format = iota // by extension, else by the first non-blank byte
	FormatCSV                 // header row, then one record per row
	FormatJSONL               // one JSON object per line
)

// maxLine bounds one JSON Lines record; a longer line is reported, not read
// into memory.
const maxLine = 4 << 20

// LineError is a malformed input line: the record on it was skipped. As a
// warning it is a value of a kept record that was not used; Filter then
// names the Filter* reason the run summary counts it under, if any.
type LineError struct {
	File   string
	Line   int
	Reason string
	Filter string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

// detectFormat picks a format from the file name, else from the first
// non-blank byte of head: '{' means JSON Lines, anything else CSV.
func detectFormat(name string, head []byte) Format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".csv", ".tsv":
		return FormatCSV
	case ".jsonl", ".ndjson", ".json":
		return FormatJSONL
	}
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return FormatJSONL
	}
	return FormatCSV
}

// filePos is a place in a records file: the byte offset just after a
// record (or the header) and the number of the line it ended on.
type filePos struct {
	offset int64
	line   int
}

// recordFn takes one good record, the line it starts on and the place
// just after it.
type recordFn func(rec store.Record, line int, end filePos) error

// readRecords parses records from r and calls fn for each good one, in
// order. A malformed line is reported through bad (as a *LineError) and
// skipped. warn reports a problem on a line whose record was still kept. The
// returned error is for the whole file (unreadable, no header) or from fn.
//
// Ids are not checked for duplicates here: that takes a set of every id,
// which for millions of records is the state's to keep (see Load).
func readRecords(name string, r io.Reader, format Format, fn recordFn, bad func(*LineError), warn func(*LineError)) error {
	return readRecordsFrom(name, r, nil, filePos{}, format, fn, bad, warn)
}

// readRecordsFrom is readRecords resuming at from (the place after a
// record an earlier read reached; the zero place is the start). rest
// reads the file from from.offset on; r reads it from the start, which a
// CSV file needs for its header. With from zero rest is nil and r is read.
func readRecordsFrom(name string, r io.Reader, rest io.Reader, from filePos, format Format, fn recordFn, bad func(*LineError), warn func(*LineError)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if format == FormatAuto {
		head, _ := br.Peek(512)
		format = detectFormat(name, head)
	}
	p := &recordParser{name: name, bad: bad, warn: warn}
	if format == FormatJSONL {
		if rest != nil {
			br = bufio.NewReaderSize(rest, 64<<10)
		}
		return p.jsonl(br, from, fn)
	}
	return p.csv(br, rest, from, fn)
}

type recordParser struct {
	name string
	seq  int64
	bad  func(*LineError)
	warn func(*LineError)
}

func (p *recordParser) lineErr(line int, format string, args ...any) *LineError {
	return &LineError{File: p.name, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// finish assigns the id and hands the record on.
func (p *recordParser) finish(line int, end filePos, rec store.Record, fn recordFn) error {
	id := strings.TrimSpace(rec.Fields["id"])
	if id == "" {
		id = strconv.Itoa(line)
	}
	p.seq++
	rec.ID = id
	rec.Seq = p.seq
	return fn(rec, line, end)
}

func (p *recordParser) csv(r io.Reader, rest io.Reader, from filePos, fn recordFn) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked here, so the message names the line
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err == io.EOF {
		return nil // an empty file holds no records
	}
	if err != nil {
		return fmt.Errorf("%s:1: header: %w", p.name, unwrapCSV(err))
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\xef\xbb\xbf")
	}
	seen := make(map[string]bool, len(header))
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if h == "" {
			return fmt.Errorf("%s:1: header: column %d has no name", p.name, i+1)
		}
		if seen[h] {
			return fmt.Errorf("%s:1: header: duplicate column %q", p.name, h)
		}
		seen[h] = true
	}
	base := filePos{} // where cr started reading
	if rest != nil {
		cr = csv.NewReader(rest)
		cr.FieldsPerRecord = -1
		base = from
	}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				p.bad(p.lineErr(base.line+pe.StartLine, "%v", pe.Err))
				continue
			}
			return fmt.Errorf("%s: %w", p.name, err)
		}
		line, _ := cr.FieldPos(0)
		line += base.line
		end := filePos{offset: base.offset + cr.InputOffset(), line: line}
		if len(row) != len(header) {
			p.bad(p.lineErr(line, "%d columns, header has %d", len(row), len(header)))
			continue
		}
		rec := store.Record{Fields: make(map[string]string, len(header)), Order: append([]string(nil), header...)}
		for i, h := range header {
			v := strings.TrimSpace(row[i])
			rec.Fields[h] = v
			if h == "links" {
				for _, tok := range strings.Fields(v) {
					p.addLink(&rec, line, tok, true)
				}
				continue
			}
			p.addLink(&rec, line, v, false)
		}
		// A record may span lines (a quoted newline): it ends where the
		// reader is now.
		if l, _ := cr.FieldPos(len(row) - 1); base.line+l > end.line {
			end.line = base.line + l
		}
		if err := p.finish(line, end, rec, fn); err != nil {
			return err
		}
	}
}

func unwrapCSV(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// addLink adds v to the record's links when it is an http(s) URL. In a
// links column or list, anything else is reported (and the record kept). A
// URL longer than etl.MaxURLLength is refused wherever it is, reported
// with the url-length filter the summary counts.
func (p *recordParser) addLink(rec *store.Record, line int, v string, explicit bool) {
	if !looksLikeURL(v) {
		if explicit && v != "" {
			p.warn(p.lineErr(line, "links: %q is not an http(s) URL; ignored", v))
		}
		return
	}
	n, err := etl.NormalizeURL(v)
	switch {
	case err != nil && len(v) > etl.MaxURLLength:
		e := p.lineErr(line, "link %q… (%d bytes) is longer than %d bytes; refused", v[:64], len(v), etl.MaxURLLength)
		e.Filter = FilterURLLength
		p.warn(e)
		return
	case err != nil:
		if explicit {
			p.warn(p.lineErr(line, "links: %q: %v; ignored", v, err))
		}
		return
	}
	for _, l := range rec.Links {
		if l == n {
			return
		}
	}
	rec.Links = append(rec.Links, n)
}

func looksLikeURL(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t\r\n") {
		return false
	}
	l := strings.ToLower(v[:8])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

func (p *recordParser) jsonl(br *bufio.Reader, from filePos, fn recordFn) error {
	line, offset := from.line, from.offset
	for {
		raw, n, tooLong, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", p.name, line+1, err)
		}
		line++
		offset += int64(n)
		if tooLong {
			p.bad(p.lineErr(line, "line longer than %d bytes", maxLine))
			continue
		}
		if line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue // a blank line holds no record
		}
		rec, reason := p.jsonRecord(raw, line)
		if reason != "" {
			p.bad(p.lineErr(line, "%s", reason))
			continue
		}
		if err := p.finish(line, filePos{offset: offset, line: line}, rec, fn); err != nil {
			return err
		}
	}
}

// readLine reads one line without its terminator, and says how many bytes
// it consumed. A line over maxLine is consumed and reported as too long.
func readLine(br *bufio.Reader) (line []byte, n int, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if len(buf)+len(chunk) > maxLine {
			tooLong = true
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(buf) == 0 && !tooLong {
				return nil, n, false, io.EOF
			}
			return bytes.TrimRight(buf, "\r\n"), n, tooLong, nil
		case err != nil:
			return nil, n, false, err
		}
		return bytes.TrimRight(buf, "\r\n"), n, tooLong, nil
	}
}

func (p *recordParser) jsonRecord(raw []byte, line int) (store.Record, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return store.Record{}, "bad JSON: " + err.Error()
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return store.Record{}, "not a JSON object"
	}
	rec := store.Record{Fields: make(map[string]string)}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return store.Record{}, "bad JSON: " + err.Error()
		}
		key := kt.(string) // object keys are always strings
		var v any
		if err := dec.Decode(&v); err != nil {
			return store.Record{}, "bad JSON: " + err.Error()
		}
		if _, dup := rec.Fields[key]; dup {
			return store.Record{}, fmt.Sprintf("duplicate key %q", key)
		}
		rec.Order = append(rec.Order, key)
		if key == "links" {
			s, reason := p.jsonLinks(&rec, line, v)
			if reason != "" {
				return store.Record{}, reason
			}
			rec.Fields[key] = s
			continue
		}
		s := jsonText(v)
		rec.Fields[key] = s
		p.mineLinks(&rec, line, v)
	}
	if _, err := dec.Token(); err != nil {
		return store.Record{}, "bad JSON: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return store.Record{}, "bad JSON: trailing data after the object"
	}
	if id, ok := rec.Fields["id"]; ok && id != "" {
		if v := strings.TrimSpace(id); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			return store.Record{}, "id must be a string or a number"
		}
	}
	return rec, ""
}

// jsonLinks reads a links value: a list of URLs, or one string of URLs
// separated by whitespace.
func (p *recordParser) jsonLinks(rec *store.Record, line int, v any) (string, string) {
	switch x := v.(type) {
	case nil:
		return "", ""
	case string:
		for _, tok := range strings.Fields(x) {
			p.addLink(rec, line, tok, true)
		}
		return strings.TrimSpace(x), ""
	case []any:
		var parts []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				if e == nil {
					continue
				}
				return "", fmt.Sprintf("links: element %s is not a string", jsonText(e))
			}
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p.addLink(rec, line, s, true)
			parts = append(parts, s)
		}
		return strings.Join(parts, " "), ""
	}
	return "", "links must be a list of URLs or a string"
}

// mineLinks adds every http(s) URL string in v (a scalar or a list).
func (p *recordParser) mineLinks(rec *store.Record, line int, v any) {
	switch x := v.(type) {
	case string:
		p.addLink(rec, line, strings.TrimSpace(x), false)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				p.addLink(rec, line, strings.TrimSpace(s), false)
			}
		}
	}
}

// jsonText renders a JSON value as a field value: strings as themselves,
// numbers as written, null as missing, lists and objects as compact JSON.
func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
