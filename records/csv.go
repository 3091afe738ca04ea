package records

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"backfill/etl"
)

// Reading CSV: the header, each row as a record, its links.

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
				return fmt.Errorf("%s:%d: header: longer than %d bytes", p.name, line, MaxRecordBytes)
			}
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
			if len(text) == 0 {
				continue // blank lines before the header
			}
			if header, err = p.csvHeader(text, line); err != nil {
				return err
			}
			if col := string(p.id); p.id != IDLine && !slices.Contains(header, col) {
				return fmt.Errorf("%s:%d: %w: the header has no column %q%s; name the id column with --id NAME, or number the records by their line with --id line",
					p.name, line, ErrNoID, col, nearName(col, header))
			}
			if p.resume != nil {
				p.resume()
			}
			continue
		}
		if tooLong {
			if err := p.malformed(string(FormatCSV), line, text, p.lineErr(line, "%s", tooLongReason(text))); err != nil {
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
