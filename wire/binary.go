package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Tasks and Results are most of the traffic (one each per page), so their
// bodies are encoded compactly rather than as JSON: a sequence of fields,
// each a tag (field number << 1 | type) and a value, where the type is a
// varint or a length-prefixed byte string (a string, or a nested Field or
// Link). A repeated field is the same tag again. Field numbers are append
// only; a decoder skips numbers it does not know, so a newer peer may add
// fields without breaking an older one.

const (
	typeVarint = 0
	typeBytes  = 1
)

// Field numbers. Append only.
const (
	taskID     = 1
	taskLease  = 2
	taskURL    = 3
	taskHost   = 4
	taskDepth  = 5
	taskRender = 6
	taskETag   = 7
	taskLastMo = 8
	taskHostAt = 9
	taskHops   = 10

	resTaskID     = 1
	resLease      = 2
	resSupervisor = 3
	resURL        = 4
	resFinalURL   = 5
	resStatus     = 6
	resClass      = 7
	resError      = 8
	resBytes      = 9
	resFetchedAt  = 10
	resMapping    = 11
	resField      = 12
	resLink       = 13
	resFieldErr   = 14
	resTextHash   = 15
	resSimhash    = 16
	resWords      = 17
	resNotMod     = 18
	resETag       = 19
	resLastMo     = 20
	resJSOnly     = 21
	resChain      = 22
	resRedirect   = 23
	resDelay      = 24
	resReady      = 25
	resHopRefused = 26
	resTLSError   = 27

	fieldMapping = 1
	fieldName    = 2
	fieldValue   = 3
	fieldMatch   = 4

	linkURL    = 1
	linkParsed = 2
	linkText   = 3
)

// enc appends fields to a buffer. Zero values are left out.
type enc []byte

func (e *enc) varint(num int, v int64) {
	if v == 0 {
		return
	}
	*e = binary.AppendUvarint(*e, uint64(num)<<1|typeVarint)
	*e = binary.AppendVarint(*e, v)
}

func (e *enc) bool(num int, v bool) {
	if v {
		e.varint(num, 1)
	}
}

func (e *enc) bytes(num int, b []byte) {
	*e = binary.AppendUvarint(*e, uint64(num)<<1|typeBytes)
	*e = binary.AppendUvarint(*e, uint64(len(b)))
	*e = append(*e, b...)
}

func (e *enc) string(num int, s string) {
	if s != "" {
		e.elem(num, s)
	}
}

// elem writes s even when empty: an element of a repeated field.
func (e *enc) elem(num int, s string) {
	*e = binary.AppendUvarint(*e, uint64(num)<<1|typeBytes)
	*e = binary.AppendUvarint(*e, uint64(len(s)))
	*e = append(*e, s...)
}

func (e *enc) time(num int, t time.Time) {
	if !t.IsZero() {
		e.varint(num, t.UnixNano())
	}
}

var errTruncated = errors.New("truncated field")

// dec walks the fields of one body.
type dec struct {
	b   []byte
	num int
	typ int
	v   int64  // a varint field's value
	raw []byte // a bytes field's value
}

// next reads the next field; it returns false at the end or on an error.
func (d *dec) next() (bool, error) {
	if len(d.b) == 0 {
		return false, nil
	}
	tag, n := binary.Uvarint(d.b)
	if n <= 0 || tag>>1 > 1<<20 {
		return false, errors.New("bad field tag")
	}
	d.b = d.b[n:]
	d.num, d.typ = int(tag>>1), int(tag&1)
	switch d.typ {
	case typeVarint:
		v, n := binary.Varint(d.b)
		if n <= 0 {
			return false, fmt.Errorf("field %d: %w", d.num, errTruncated)
		}
		d.v, d.b = v, d.b[n:]
	default:
		l, n := binary.Uvarint(d.b)
		if n <= 0 || l > uint64(len(d.b)-n) {
			return false, fmt.Errorf("field %d: %w", d.num, errTruncated)
		}
		d.raw, d.b = d.b[n:n+int(l)], d.b[n+int(l):]
	}
	return true, nil
}

// str is the current field as a string, if it is a bytes field.
func (d *dec) str() (string, error) {
	if d.typ != typeBytes {
		return "", fmt.Errorf("field %d: want bytes, got a varint", d.num)
	}
	return string(d.raw), nil
}

// int is the current field as an integer, if it is a varint field.
func (d *dec) int() (int64, error) {
	if d.typ != typeVarint {
		return 0, fmt.Errorf("field %d: want a varint, got bytes", d.num)
	}
	return d.v, nil
}

func encodeTask(t *Task) []byte {
	var e enc
	e.string(taskID, t.ID)
	e.varint(taskLease, t.Lease)
	e.string(taskURL, t.URL)
	e.string(taskHost, t.Host)
	e.varint(taskDepth, int64(t.Depth))
	e.bool(taskRender, t.Render)
	e.string(taskETag, t.ETag)
	e.string(taskLastMo, t.LastModified)
	e.time(taskHostAt, t.HostLast)
	e.varint(taskHops, int64(t.Hops))
	return e
}

func decodeTask(b []byte) (*Task, error) {
	t := new(Task)
	d := dec{b: b}
	for {
		ok, err := d.next()
		if err != nil || !ok {
			return t, err
		}
		switch d.num {
		case taskID:
			t.ID, err = d.str()
		case taskLease:
			t.Lease, err = d.int()
		case taskURL:
			t.URL, err = d.str()
		case taskHost:
			t.Host, err = d.str()
		case taskDepth:
			var v int64
			v, err = d.int()
			t.Depth = int(v)
		case taskRender:
			var v int64
			v, err = d.int()
			t.Render = v != 0
		case taskETag:
			t.ETag, err = d.str()
		case taskLastMo:
			t.LastModified, err = d.str()
		case taskHostAt:
			var v int64
			v, err = d.int()
			if v != 0 {
				t.HostLast = time.Unix(0, v).UTC()
			}
		case taskHops:
			var v int64
			v, err = d.int()
			t.Hops = int(v)
		}
		if err != nil {
			return nil, err
		}
	}
}

func encodeResult(r *Result) []byte {
	e := make(enc, 0, 256)
	e.string(resTaskID, r.TaskID)
	e.varint(resLease, r.Lease)
	e.string(resSupervisor, r.Supervisor)
	e.string(resURL, r.URL)
	e.string(resFinalURL, r.FinalURL)
	e.varint(resStatus, int64(r.Status))
	e.string(resClass, r.Class)
	e.string(resError, r.Error)
	e.varint(resBytes, r.Bytes)
	e.time(resFetchedAt, r.FetchedAt)
	for _, m := range r.Mappings {
		e.elem(resMapping, m)
	}
	var sub enc
	for _, f := range r.Fields {
		sub = sub[:0]
		sub.string(fieldMapping, f.Mapping)
		sub.string(fieldName, f.Name)
		for _, v := range f.Values {
			sub.elem(fieldValue, v)
		}
		sub.bool(fieldMatch, f.Match)
		e.bytes(resField, sub)
	}
	for _, l := range r.Links {
		sub = sub[:0]
		sub.string(linkURL, l.URL)
		sub.bool(linkParsed, l.Parsed)
		sub.string(linkText, l.Text)
		e.bytes(resLink, sub)
	}
	for _, fe := range r.FieldErrs {
		e.elem(resFieldErr, fe)
	}
	if len(r.TextHash) > 0 {
		e.bytes(resTextHash, r.TextHash)
	}
	e.varint(resSimhash, int64(r.Simhash)) // the bits as they are; zigzag keeps the top one
	e.varint(resWords, int64(r.Words))
	e.bool(resNotMod, r.NotModified)
	e.string(resETag, r.ETag)
	e.string(resLastMo, r.LastModified)
	e.bool(resJSOnly, r.JSOnly)
	for _, c := range r.Chain {
		e.elem(resChain, c)
	}
	e.string(resRedirect, r.Redirect)
	e.varint(resDelay, int64(r.Delay))
	e.varint(resReady, int64(r.Ready))
	e.string(resHopRefused, r.HopRefused)
	e.string(resTLSError, r.TLSError)
	return e
}

func decodeResult(b []byte) (*Result, error) {
	r := new(Result)
	d := dec{b: b}
	for {
		ok, err := d.next()
		if err != nil || !ok {
			return r, err
		}
		var v int64
		var s string
		switch d.num {
		case resTaskID:
			r.TaskID, err = d.str()
		case resLease:
			r.Lease, err = d.int()
		case resSupervisor:
			r.Supervisor, err = d.str()
		case resURL:
			r.URL, err = d.str()
		case resFinalURL:
			r.FinalURL, err = d.str()
		case resStatus:
			v, err = d.int()
			r.Status = int(v)
		case resClass:
			r.Class, err = d.str()
		case resError:
			r.Error, err = d.str()
		case resBytes:
			r.Bytes, err = d.int()
		case resFetchedAt:
			v, err = d.int()
			if v != 0 { // zero is how an absent time is written
				r.FetchedAt = time.Unix(0, v).UTC()
			}
		case resMapping:
			s, err = d.str()
			r.Mappings = append(r.Mappings, s)
		case resField:
			var f Field
			f, err = decodeField(d)
			r.Fields = append(r.Fields, f)
		case resLink:
			var l Link
			l, err = decodeLink(d)
			r.Links = append(r.Links, l)
		case resFieldErr:
			s, err = d.str()
			r.FieldErrs = append(r.FieldErrs, s)
		case resTextHash:
			if d.typ != typeBytes {
				err = fmt.Errorf("field %d: want bytes, got a varint", d.num)
			} else if len(d.raw) > 0 { // empty is how an absent hash is written
				r.TextHash = append([]byte(nil), d.raw...)
			} else {
				r.TextHash = nil
			}
		case resSimhash:
			v, err = d.int()
			r.Simhash = uint64(v)
		case resWords:
			v, err = d.int()
			r.Words = int(v)
		case resNotMod:
			v, err = d.int()
			r.NotModified = v != 0
		case resETag:
			r.ETag, err = d.str()
		case resLastMo:
			r.LastModified, err = d.str()
		case resJSOnly:
			v, err = d.int()
			r.JSOnly = v != 0
		case resChain:
			s, err = d.str()
			r.Chain = append(r.Chain, s)
		case resRedirect:
			r.Redirect, err = d.str()
		case resDelay:
			v, err = d.int()
			r.Delay = time.Duration(v)
		case resReady:
			v, err = d.int()
			r.Ready = time.Duration(v)
		case resHopRefused:
			r.HopRefused, err = d.str()
		case resTLSError:
			r.TLSError, err = d.str()
		}
		if err != nil {
			return nil, err
		}
	}
}

func decodeField(outer dec) (Field, error) {
	var f Field
	if outer.typ != typeBytes {
		return f, fmt.Errorf("field %d: want bytes, got a varint", outer.num)
	}
	d := dec{b: outer.raw}
	for {
		ok, err := d.next()
		if err != nil || !ok {
			return f, err
		}
		var s string
		var v int64
		switch d.num {
		case fieldMapping:
			f.Mapping, err = d.str()
		case fieldName:
			f.Name, err = d.str()
		case fieldValue:
			s, err = d.str()
			f.Values = append(f.Values, s)
		case fieldMatch:
			v, err = d.int()
			f.Match = v != 0
		}
		if err != nil {
			return f, err
		}
	}
}

func decodeLink(outer dec) (Link, error) {
	var l Link
	if outer.typ != typeBytes {
		return l, fmt.Errorf("field %d: want bytes, got a varint", outer.num)
	}
	d := dec{b: outer.raw}
	for {
		ok, err := d.next()
		if err != nil || !ok {
			return l, err
		}
		var v int64
		switch d.num {
		case linkURL:
			l.URL, err = d.str()
		case linkParsed:
			v, err = d.int()
			l.Parsed = v != 0
		case linkText:
			l.Text, err = d.str()
		}
		if err != nil {
			return l, err
		}
	}
}
