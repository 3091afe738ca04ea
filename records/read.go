package records

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
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

// MaxRecordBytes bounds one input record the crawl reads, the same for
// both formats: a JSON Lines line, or a CSV record (which may span lines
// inside quotes), without its line terminator. A longer one is a
// malformed line, reported, counted, not crawled for, and kept as given
// up to MaxKeptBytes, so that export gives it back with its text; one
// longer still is read through, not into memory, and exported marked
// without its text.
const MaxRecordBytes = 4 << 20

// MaxKeptBytes bounds the text of a record over MaxRecordBytes that is
// still kept, for export to give back.
const MaxKeptBytes = 64 << 20

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

// ID says where a record's id comes from: the value of the column (a
// JSON line's member) of that name, DefaultID unless told otherwise; or,
// IDLine, the number of the line the record starts on. A file whose
// records have no id column is refused (ErrNoID), and a record whose id
// is empty is malformed, rather than numbered silently: ids are how
// records are told apart, resumed and exported.
type ID string

const (
	DefaultID ID = "id"
	IDLine    ID = "line"
)

// ErrNoID is wrapped by the error for a file without the id column: a
// CSV header without it, a JSON Lines file whose first record has no
// such member.
var ErrNoID = errors.New("no id column")

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
func Read(name string, r io.Reader, format Format, id ID, fn func(Record) error, bad func(*LineError), warn func(*LineError)) error {
	return readAll(name, r, nil, Pos{}, format, id, make(map[string]int), nil, func(rec Record, _ int, _ Pos) error {
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
func ReadFrom(name string, r, rest io.Reader, from Pos, format Format, id ID, fn RecordFunc, bad func(*LineError), warn func(*LineError)) error {
	return readAll(name, r, rest, from, format, id, nil, nil, fn, bad, warn)
}

// readAll is Read and ReadFrom: ids, when not nil, is the
// set of ids seen so far (id → line), of every id or of those track says
// to keep.
func readAll(name string, r, rest io.Reader, from Pos, format Format, id ID, ids map[string]int, track func(id string) bool, fn RecordFunc, bad func(*LineError), warn func(*LineError)) error {
	if id == "" {
		id = DefaultID
	}
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(sniffBytes)
	if why := sniffBinary(head); why != "" {
		return fmt.Errorf("%s: %w: %s", name, ErrNotRecords, why)
	}
	if format == FormatAuto {
		format = detectFormat(name, head)
	}
	p := &recordParser{name: name, id: id, ids: ids, track: track, bad: bad, warn: warn, fn: fn, resumed: rest != nil}
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

type recordParser struct {
	name   string
	id     ID   // where ids come from
	idSeen bool // a good record had its id (JSON Lines: the first decides)
	// resumed: the read starts past the file's first record.
	resumed bool
	ids     map[string]int       // id → line it was first seen on; nil: not checked (Load)
	track   func(id string) bool // the ids ids keeps; nil: all
	seq     int64
	header  bool // a CSV header was read
	fn      RecordFunc
	bad     func(*LineError)
	warn    func(*LineError)
	rr      *recordReader
	// resume, when set, moves the reader to where a resumed read starts,
	// once a CSV file's header is read.
	resume func()
}

func (p *recordParser) lineErr(line int, format string, args ...any) *LineError {
	return &LineError{File: p.name, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// tooLongReason is the reason a record over MaxRecordBytes gets, in
// either format: text is nil when it was over MaxKeptBytes too.
func tooLongReason(text []byte) string {
	if text == nil {
		return fmt.Sprintf("record longer than %d bytes (%d MiB, the most one line or CSV record may be and be kept); not read",
			MaxKeptBytes, MaxKeptBytes>>20)
	}
	return fmt.Sprintf("record of %d bytes, longer than %d (%d MiB, the limit for one line or CSV record the crawl reads); not crawled for, kept as given",
		len(text), MaxRecordBytes, MaxRecordBytes>>20)
}

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
	id := strconv.Itoa(line)
	if p.id != IDLine {
		col := string(p.id)
		v, ok := rec.Fields[col]
		var reason string
		switch {
		case !ok && rec.Format == string(FormatJSONL) && !p.idSeen && !p.resumed:
			return fmt.Errorf("%s:%d: %w: its first record has no %q member%s; give every record one, name the member ids are in with --id NAME, or number the records by their line with --id line",
				p.name, line, ErrNoID, col, nearName(col, rec.Order))
		case !ok:
			reason = fmt.Sprintf("no %q member: records are told apart by their ids", col)
		case strings.TrimSpace(v) == "":
			reason = fmt.Sprintf("empty id (%s %q): records are told apart by their ids", idWhere(rec.Format), col)
		case rec.Format == string(FormatJSONL) && (strings.HasPrefix(strings.TrimSpace(v), "{") || strings.HasPrefix(strings.TrimSpace(v), "[")):
			reason = "id must be a string or a number"
		}
		if reason != "" {
			return p.malformed(rec.Format, line, text, p.lineErr(line, "%s", reason))
		}
		p.idSeen = true
		id = strings.TrimSpace(v)
	}
	if first, dup := p.ids[id]; dup { // never with ids nil
		return p.malformed(rec.Format, line, text, p.lineErr(line, "duplicate id %q (first on line %d)", id, first))
	}
	rec.ID = id
	return p.emit(line, rec)
}

// nearName says which of names is name but for case, if one is: the
// id column a user meant.
func nearName(name string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return fmt.Sprintf(" (it has %q: the name must match exactly, --id %s)", n, n)
		}
	}
	return ""
}

// idWhere is what holds a record's id in format: a column or a member.
func idWhere(format string) string {
	if format == string(FormatJSONL) {
		return "member"
	}
	return "column"
}
