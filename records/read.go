package records

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"backfill/etl"
)

// Format is the layout of a records file, and as text a Record's.
type Format string

const (
	FormatAuto  Format = ""      // by extension, else by the first non-blank byte
	FormatCSV   Format = "csv"   // header row, then one record per row
	FormatJSONL Format = "jsonl" // one JSON object per line
)

// Record is one line (or CSV record) of a records file as read: a good
// record (Error empty) with its id, fields, their order and the links to
// start from, or a malformed line with Error saying why. Raw is the text
// as given, without its line terminator (nil when it was over
// MaxRecordBytes); Seq numbers the records of a file from 1, good and
// malformed alike, in file order.
type Record struct {
	ID     string
	Seq    int64
	Format string // FormatCSV or FormatJSONL, as text
	Raw    []byte
	Fields map[string]string // trimmed values, as the crawl reads them
	Order  []string          // the file's columns, or the line's keys, in order
	Links  []string          // normalized http(s) URLs
	Error  string
	// TooLong is the first link refused for being longer than
	// etl.MaxURLLength (reported with FilterURLLength): a record left
	// without links says why.
	TooLong string
}

// FilterURLLength is the reason a link longer than etl.MaxURLLength is
// refused with (LineError.Filter), as the run summary counts it.
const FilterURLLength = "url-length"

// MaxRecordBytes bounds one input record, the same for both formats: a
// JSON Lines line, or a CSV record (which may span lines inside quotes),
// without its line terminator. A longer one is not read into memory: it is
// a malformed line, reported, counted and exported marked, without its
// text.
const MaxRecordBytes = 4 << 20

// sniffBytes is how much of a file's start is looked at to tell text from
// binary data.
const sniffBytes = 4096

// LineError is a malformed input line: the record on it is not crawled for.
// As a warning it is a value of a kept record that was not used; Filter
// then names the Filter* reason the run summary counts it under, if any.
type LineError struct {
	File   string
	Line   int
	Reason string
	Filter string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

// ErrNoRecords is wrapped by the error for a records file that holds no
// record at all: empty, blank, or a CSV header alone.
var ErrNoRecords = errors.New("no records")

// ErrNotRecords is wrapped by the error for a file that is not CSV or JSON
// Lines text at all (binary data).
var ErrNotRecords = errors.New("not CSV or JSON Lines")

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

// sniffBinary says why head (a file's first bytes) is not text, or "" when
// it may be: a NUL byte, more than 1% control characters, or more than 10%
// bytes that are not UTF-8 (a Latin-1 file has far fewer: its lines are
// refused one by one, with the reason). A rune cut at the end of head does
// not count.
func sniffBinary(head []byte) string {
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return fmt.Sprintf("binary data (a NUL byte at offset %d)", i)
	}
	ctl, bad := 0, 0
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			if len(head)-i < utf8.UTFMax && !utf8.FullRune(head[i:]) {
				i = len(head)
				continue
			}
			bad++
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r' && r != '\f' && r != '\v', r == 0x7f:
			ctl++
		}
		i += max(n, 1)
	}
	switch {
	case ctl*100 > len(head):
		return fmt.Sprintf("binary data (%d control characters in its first %d bytes)", ctl, len(head))
	case bad*10 > len(head):
		return fmt.Sprintf("binary data (%d bytes that are not UTF-8 in its first %d)", bad, len(head))
	}
	return ""
}

// Pos is a place in a records file: the byte offset just after a
// record (or the header) and the number of the line it ended on.
type Pos struct {
	Offset int64
	Line   int
}

// RecordFunc takes one record (good or malformed), the line it starts on
// and the place just after it.
type RecordFunc func(rec Record, line int, end Pos) error

// Read parses records from r and calls fn for each, in order: a good
// one, or a malformed one (Record.Error set, reported through bad first,
// with its text in Raw unless it was over MaxRecordBytes). A record whose
// id an earlier line had is a malformed one. warn reports a problem on a
// line whose record was still kept. The returned error is for the whole
// file (unreadable, binary, no header, no record at all) or from fn.
func Read(name string, r io.Reader, format Format, fn func(Record) error, bad func(*LineError), warn func(*LineError)) error {
	return readAll(name, r, nil, Pos{}, format, make(map[string]int), nil, func(rec Record, _ int, _ Pos) error {
		return fn(rec)
	}, bad, warn)
}

// ReadFrom is Read for a load that resumes, resuming at from (the place
// after a record an earlier read reached; the zero place is the start).
// rest reads the file from from.Offset on; r reads it from the start,
// which the check for binary data and a CSV file's header need. With from
// zero rest is nil and r is read.
//
// Ids are not checked for duplicates here: that takes a set of every id,
// which for millions of records is the state's to keep, and a malformed
// line's id is "line N" whether or not a record has that id (Load makes
// both unique through the state).
func ReadFrom(name string, r, rest io.Reader, from Pos, format Format, fn RecordFunc, bad func(*LineError), warn func(*LineError)) error {
	return readAll(name, r, rest, from, format, nil, nil, fn, bad, warn)
}

// readAll is Read and ReadFrom: ids, when not nil, is the
// set of ids seen so far (id → line), of every id or of those track says
// to keep.
func readAll(name string, r, rest io.Reader, from Pos, format Format, ids map[string]int, track func(id string) bool, fn RecordFunc, bad func(*LineError), warn func(*LineError)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(sniffBytes)
	if why := sniffBinary(head); why != "" {
		return fmt.Errorf("%s: %w: %s", name, ErrNotRecords, why)
	}
	if format == FormatAuto {
		format = detectFormat(name, head)
	}
	p := &recordParser{name: name, ids: ids, track: track, bad: bad, warn: warn, fn: fn}
	rr := &recordReader{br: br, quotes: format == FormatCSV}
	if rest != nil {
		// A CSV file's header is read from the start (csv does), then the
		// records from the place.
		p.resume = func() {
			rr.br, rr.line, rr.offset = bufio.NewReaderSize(rest, 64<<10), from.Line, from.Offset
		}
		if format == FormatJSONL {
			p.resume()
			p.resume = nil
		}
	}
	var err error
	if format == FormatJSONL {
		err = p.jsonl(rr)
	} else {
		err = p.csv(rr)
	}
	if err == nil && p.seq == 0 && rest == nil {
		what := "the file is empty"
		if p.header {
			what = "the file holds a header and no record"
		}
		err = fmt.Errorf("%s: %w: %s", name, ErrNoRecords, what)
	}
	return err
}

// recordReader reads a file's records as text: lines, or for CSV lines
// joined while a quoted cell is open, each at most MaxRecordBytes.
type recordReader struct {
	br     *bufio.Reader
	quotes bool  // CSV: a line break inside quotes does not end the record
	line   int   // lines read so far
	offset int64 // bytes read so far
}

// CSV quote states, enough to find where a record ends.
const (
	csvFieldStart = iota
	csvUnquoted
	csvQuoted
	csvQuoteInQuoted // a quote inside a quoted cell: its end, or the first of ""
)

func csvScan(st int, b []byte) int {
	for _, c := range b {
		switch st {
		case csvFieldStart:
			switch c {
			case '"':
				st = csvQuoted
			case ',', '\n':
			default:
				st = csvUnquoted
			}
		case csvUnquoted:
			if c == ',' || c == '\n' {
				st = csvFieldStart
			}
		case csvQuoted:
			if c == '"' {
				st = csvQuoteInQuoted
			}
		case csvQuoteInQuoted:
			switch c {
			case '"':
				st = csvQuoted
			case ',', '\n':
				st = csvFieldStart
			default:
				st = csvUnquoted
			}
		}
	}
	return st
}

// next returns the next record's text without its line terminator and
// the line it starts on; text is nil when the record was over
// MaxRecordBytes (it is read through, not kept). At the end it returns
// io.EOF.
func (rr *recordReader) next() (text []byte, line int, tooLong bool, err error) {
	line = rr.line + 1
	var buf []byte
	read := false
	st := csvFieldStart
	for {
		chunk, err := rr.br.ReadSlice('\n')
		rr.offset += int64(len(chunk))
		if len(chunk) > 0 {
			read = true
			if rr.quotes {
				st = csvScan(st, chunk)
			}
			// Room for a \r\n the limit does not count.
			if !tooLong && len(buf)+len(chunk) > MaxRecordBytes+2 {
				tooLong, buf = true, nil
			}
			if !tooLong {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if !read {
				return nil, 0, false, io.EOF
			}
		case err != nil:
			return nil, line, false, err
		default: // a line break
			rr.line++
			if rr.quotes && st == csvQuoted {
				continue // inside a quoted cell
			}
		}
		if err == io.EOF && len(chunk) > 0 {
			rr.line++ // a last line without a line break
		}
		if tooLong {
			return nil, line, true, nil
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if len(buf) > MaxRecordBytes {
			return nil, line, true, nil
		}
		if buf == nil {
			buf = []byte{}
		}
		return buf, line, false, nil
	}
}

// unread puts back what follows the first n bytes of text, the record
// next returned after reading from the offset start, so that next reads it
// again: the lines a quote left open took in.
func (rr *recordReader) unread(text []byte, start int64, n int) {
	consumed := int(rr.offset - start)
	rest := make([]byte, 0, consumed-n)
	rest = append(rest, text[n:]...)
	switch consumed - len(text) { // the record's line terminator
	case 1:
		rest = append(rest, '\n')
	case 2:
		rest = append(rest, '\r', '\n')
	}
	rr.offset -= int64(len(rest))
	rr.line -= bytes.Count(rest, []byte("\n"))
	if len(rest) > 0 && rest[len(rest)-1] != '\n' {
		rr.line-- // a last line without a line break counted as one
	}
	rr.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(rest), rr.br), 64<<10)
}

// unbalanced reports whether text, a malformed CSV record of several
// lines, is a quote left open on its first line rather than a cell that
// holds line breaks: the line after the first is a record of its own,
// with the header's columns.
func unbalanced(text []byte, columns int) bool {
	_, rest, ok := bytes.Cut(text, []byte("\n"))
	if !ok {
		return false
	}
	second, _, _ := bytes.Cut(rest, []byte("\n"))
	cells, err := SplitCSVRecord(bytes.TrimSuffix(second, []byte("\r")))
	return err == nil && len(cells) == columns
}

type recordParser struct {
	name   string
	ids    map[string]int       // id → line it was first seen on; nil: not checked (Load)
	track  func(id string) bool // the ids ids keeps; nil: all
	seq    int64
	header bool // a CSV header was read
	fn     RecordFunc
	bad    func(*LineError)
	warn   func(*LineError)
	rr     *recordReader
	// resume, when set, moves the reader to where a resumed read starts,
	// once a CSV file's header is read.
	resume func()
}

func (p *recordParser) lineErr(line int, format string, args ...any) *LineError {
	return &LineError{File: p.name, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// tooLongReason is the one reason a record over MaxRecordBytes gets, in
// either format.
var tooLongReason = fmt.Sprintf("record longer than %d bytes (%d MiB, the limit for one line or CSV record); not read",
	MaxRecordBytes, MaxRecordBytes>>20)

// notUTF8 is the reason of a line that is not UTF-8, or "" when it is.
func notUTF8(text []byte) string {
	if utf8.Valid(text) {
		return ""
	}
	i := 0
	for i < len(text) {
		r, n := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return fmt.Sprintf("not valid UTF-8 (byte 0x%02X at column %d): records files must be UTF-8 (convert with iconv, e.g. iconv -f latin1 -t utf-8)", text[i], i+1)
}

// malformed reports a bad line and hands it on as a malformed record, with
// its text (nil when too long) so that export gives it back.
func (p *recordParser) malformed(format string, line int, text []byte, e *LineError) error {
	p.bad(e)
	return p.emit(line, Record{ID: p.malformedID(line), Format: format, Raw: text, Error: e.Error()})
}

// malformedID is a fresh id for a malformed line: "line N" (not N, which
// a record's own id, or the line number of a record without one, may
// well be), or if that is taken a variant of it. Without ids (Load) it is
// "line N", which Load makes unique.
func (p *recordParser) malformedID(line int) string {
	return MalformedID(line, func(id string) bool {
		_, taken := p.ids[id]
		return taken
	})
}

// MalformedID is "line N", or if taken says it is, "line N (2)", … .
func MalformedID(line int, taken func(string) bool) string {
	id := fmt.Sprintf("line %d", line)
	for n := 2; ; n++ {
		if !taken(id) {
			return id
		}
		id = fmt.Sprintf("line %d (%d)", line, n)
	}
}

// emit numbers a record and hands it on, with the place after it.
func (p *recordParser) emit(line int, rec Record) error {
	if p.ids != nil && (p.track == nil || p.track(rec.ID)) {
		p.ids[rec.ID] = line
	}
	p.seq++
	rec.Seq = p.seq
	return p.fn(rec, line, Pos{Offset: p.rr.offset, Line: p.rr.line})
}

// finish assigns the id, refuses duplicates and hands the record on.
func (p *recordParser) finish(line int, text []byte, rec Record) error {
	id := strings.TrimSpace(rec.Fields["id"])
	if id == "" {
		id = strconv.Itoa(line)
	}
	if first, dup := p.ids[id]; dup { // never with ids nil
		return p.malformed(rec.Format, line, text, p.lineErr(line, "duplicate id %q (first on line %d)", id, first))
	}
	rec.ID = id
	return p.emit(line, rec)
}

func (p *recordParser) csv(rr *recordReader) error {
	p.rr = rr
	var header []string
	for {
		start := rr.offset
		text, line, tooLong, err := rr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", p.name, line, err)
		}
		if header == nil {
			if tooLong {
				return fmt.Errorf("%s:%d: header: %s", p.name, line, tooLongReason)
			}
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
			if len(text) == 0 {
				continue // blank lines before the header
			}
			if header, err = p.csvHeader(text, line); err != nil {
				return err
			}
			if p.resume != nil {
				p.resume()
			}
			continue
		}
		if tooLong {
			if err := p.malformed(string(FormatCSV), line, nil, p.lineErr(line, "%s", tooLongReason)); err != nil {
				return err
			}
			continue
		}
		if len(text) == 0 {
			continue // a blank line holds no record
		}
		text = bytes.Clone(text)
		reason := notUTF8(text)
		var rec Record
		if reason == "" {
			rec, reason = p.csvRecord(text, header, line)
		}
		if reason != "" && unbalanced(text, len(header)) {
			// A quote opened and never closed on its line: the lines it
			// took in are records of their own. The line alone is
			// malformed, and the reader goes on from the next.
			first, _, _ := bytes.Cut(text, []byte("\n"))
			rr.unread(text, start, len(first)+1)
			text = bytes.TrimSuffix(first, []byte("\r"))
			reason = fmt.Sprintf("a quote opened at column %d is not closed on this line (the lines after it are read as records of their own)", bytes.IndexByte(text, '"')+1)
		}
		if reason != "" {
			if err := p.malformed(string(FormatCSV), line, text, p.lineErr(line, "%s", reason)); err != nil {
				return err
			}
			continue
		}
		if err := p.finish(line, text, rec); err != nil {
			return err
		}
	}
}

// csvRecord reads one CSV record's text (UTF-8) under header, or says why
// it is malformed.
func (p *recordParser) csvRecord(text []byte, header []string, line int) (Record, string) {
	cells, err := SplitCSVRecord(text)
	if err != nil {
		return Record{}, err.Error()
	}
	if len(cells) != len(header) {
		return Record{}, fmt.Sprintf("%d columns, header has %d", len(cells), len(header))
	}
	rec := Record{Format: string(FormatCSV), Raw: text, Fields: make(map[string]string, len(header)), Order: header}
	for i, h := range header {
		v := strings.TrimSpace(cells[i])
		rec.Fields[h] = v
		if h == "links" {
			for _, tok := range strings.Fields(v) {
				p.addLink(&rec, line, tok, true)
			}
			continue
		}
		p.addLink(&rec, line, v, false)
	}
	return rec, ""
}

// Parse reads a good record's Raw text again as Read read it, for a store
// that keeps the text alone: its fields, their order and its links.
// header is the file's for a CSV record (a JSON line has its own keys).
// Text Read took as a good record always parses; anything else is an
// error saying why.
func Parse(format string, raw []byte, header []string) (Record, error) {
	p := &recordParser{warn: func(*LineError) {}}
	var rec Record
	reason := notUTF8(raw)
	if reason == "" {
		switch Format(format) {
		case FormatCSV:
			rec, reason = p.csvRecord(raw, header, 0)
		case FormatJSONL:
			rec, reason = p.jsonRecord(raw, 0)
		default:
			reason = fmt.Sprintf("unknown format %q", format)
		}
	}
	if reason != "" {
		return Record{}, errors.New(reason)
	}
	return rec, nil
}

// csvHeader reads the header row: every column named, once. Names are
// trimmed of surrounding spaces.
func (p *recordParser) csvHeader(text []byte, line int) ([]string, error) {
	if reason := notUTF8(text); reason != "" {
		return nil, fmt.Errorf("%s:%d: header: %s", p.name, line, reason)
	}
	header, err := SplitCSVRecord(text)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: header: %w", p.name, line, err)
	}
	seen := make(map[string]bool, len(header))
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if h == "" {
			return nil, fmt.Errorf("%s:%d: header: column %d has no name", p.name, line, i+1)
		}
		if seen[h] {
			return nil, fmt.Errorf("%s:%d: header: duplicate column %q", p.name, line, h)
		}
		seen[h] = true
	}
	p.header = true
	return header, nil
}

// addLink adds v to the record's links when it is an http(s) URL. In a
// links column or list, anything else is reported (and the record kept). A
// URL longer than etl.MaxURLLength is refused wherever it is, reported
// with the url-length filter the summary counts.
func (p *recordParser) addLink(rec *Record, line int, v string, explicit bool) {
	if !LooksLikeURL(v) {
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
		if rec.TooLong == "" {
			rec.TooLong = v
		}
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

// LooksLikeURL says whether v reads as an http(s) URL: no white space,
// an http:// or https:// scheme in any case.
func LooksLikeURL(v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t\r\n") {
		return false
	}
	l := strings.ToLower(v[:8])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

func (p *recordParser) jsonl(rr *recordReader) error {
	p.rr = rr
	for {
		text, line, tooLong, err := rr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", p.name, line, err)
		}
		if tooLong {
			if err := p.malformed(string(FormatJSONL), line, nil, p.lineErr(line, "%s", tooLongReason)); err != nil {
				return err
			}
			continue
		}
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue // a blank line holds no record
		}
		text = bytes.Clone(text)
		reason := notUTF8(text)
		var rec Record
		if reason == "" {
			rec, reason = p.jsonRecord(text, line)
		}
		if reason != "" {
			if err := p.malformed(string(FormatJSONL), line, text, p.lineErr(line, "%s", reason)); err != nil {
				return err
			}
			continue
		}
		if err := p.finish(line, text, rec); err != nil {
			return err
		}
	}
}

func (p *recordParser) jsonRecord(raw []byte, line int) (Record, string) {
	members, _, err := JSONMembers(raw)
	if err != nil {
		return Record{}, err.Error()
	}
	rec := Record{Format: string(FormatJSONL), Raw: raw, Fields: make(map[string]string, len(members))}
	for _, m := range members {
		v, err := memberValue(m.Value)
		if err != nil {
			return Record{}, "bad JSON: " + err.Error()
		}
		rec.Order = append(rec.Order, m.Key)
		if m.Key == "links" {
			s, reason := p.jsonLinks(&rec, line, v)
			if reason != "" {
				return Record{}, reason
			}
			rec.Fields[m.Key] = s
			continue
		}
		rec.Fields[m.Key] = jsonText(v)
		p.mineLinks(&rec, line, v)
	}
	if id, ok := rec.Fields["id"]; ok && id != "" {
		if v := strings.TrimSpace(id); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			return Record{}, "id must be a string or a number"
		}
	}
	return rec, ""
}

// memberValue decodes one member's value (text JSONMembers has checked)
// as json.Decoder with UseNumber would: a UTF-8 string without escapes, a
// number and a literal straight from the text, the rest (escaped strings,
// lists, objects) through the decoder.
func memberValue(text []byte) (any, error) {
	switch c := text[0]; {
	case c == '"' && bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text):
		return string(text[1 : len(text)-1]), nil
	case c == '-' || c >= '0' && c <= '9':
		return json.Number(text), nil
	case c == 't':
		return true, nil
	case c == 'f':
		return false, nil
	case c == 'n':
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// jsonLinks reads a links value: a list of URLs, or one string of URLs
// separated by whitespace.
func (p *recordParser) jsonLinks(rec *Record, line int, v any) (string, string) {
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
func (p *recordParser) mineLinks(rec *Record, line int, v any) {
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

// jsonText renders a JSON value as the crawl reads a field: strings as
// themselves, numbers as written, null as missing, lists and objects as
// compact JSON. (Export writes the value as given, from Record.Raw.)
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
