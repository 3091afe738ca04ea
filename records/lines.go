package records

import (
	"bufio"
	"bytes"
	"io"
)

// Reading a file line by line as records: a CSV row may span lines, a
// record has a size limit, and a line read may be given back.

// recordReader reads a file's records as text: lines, or for CSV lines
// joined while a quoted cell is open, each at most MaxRecordBytes.
type recordReader struct {
	br     *bufio.Reader
	quotes bool  // CSV: a line break inside quotes does not end the record
	line   int   // lines read so far
	offset int64 // bytes read so far
}

// next returns the next record's text without its line terminator and
// the line it starts on; tooLong says it is over MaxRecordBytes, and text
// is then nil when it is over MaxKeptBytes too (it is read through, not
// kept). At the end it returns io.EOF.
func (rr *recordReader) next() (text []byte, line int, tooLong bool, err error) {
	line = rr.line + 1
	var buf []byte
	read, dropped := false, false
	st := csvFieldStart
	for {
		chunk, err := rr.br.ReadSlice('\n')
		rr.offset += int64(len(chunk))
		if len(chunk) > 0 {
			read = true
			if rr.quotes {
				st = csvScan(st, chunk)
			}
			// Room for a \r\n the limits do not count.
			if !dropped && len(buf)+len(chunk) > MaxKeptBytes+2 {
				dropped, buf = true, nil
			}
			if !dropped {
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
		if dropped {
			return nil, line, true, nil
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if len(buf) > MaxKeptBytes {
			return nil, line, true, nil
		}
		if buf == nil {
			buf = []byte{}
		}
		return buf, line, len(buf) > MaxRecordBytes, nil
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

// CSV quote states, enough to find where a record ends.
const (
	csvFieldStart = iota
	csvUnquoted
	csvQuoted
	csvQuoteInQuoted // a quote inside a quoted cell: its end, or the first of ""
)

// csvScan carries the quote state st over b and returns it: a line ends
// its record only outside a quoted cell.
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
