package store

import (
	"encoding/json"
	"fmt"
	"time"

	"backfill/records"
)

// The SQLite backend keeps a record's maps and lists as JSON text and its
// times as fixed-width UTC text. What it reads back may have been written by
// another process, another build or a hand edit, so every decoder here
// returns an error instead of trusting the column.

// timeLayout is fixed width (always nine fractional digits, always "Z"), so
// comparing two stored times as text compares them as times; PutLastCrawl's
// max() relies on it.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Errorf("time %v: year outside 0..9999", t)
	}
	return t.Format(timeLayout), nil
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// conflictJSON fixes the stored shape of a Conflict independently of the Go
// field names.
type conflictJSON struct {
	Value  string `json:"value"`
	Source string `json:"source"`
	Depth  int    `json:"depth"`
}

func encodeConflicts(cs []Conflict) (string, error) {
	out := make([]conflictJSON, len(cs))
	for i, c := range cs {
		out[i] = conflictJSON(c)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode conflicts: %w", err)
	}
	return string(b), nil
}

func decodeConflicts(s string) ([]Conflict, error) {
	var in []conflictJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Conflict, len(in))
	for i, c := range in {
		out[i] = Conflict(c)
	}
	return out, nil
}

// priorJSON fixes the shape of a Prior, stored and exported.
type priorJSON struct {
	Value    string `json:"value"`
	Source   string `json:"source"`
	Mapping  string `json:"mapping"`
	Depth    int    `json:"depth"`
	At       string `json:"at"`
	Replaced string `json:"replaced"`
}

func encodeHistory(ps []Prior) (string, error) {
	out := make([]priorJSON, len(ps))
	for i, p := range ps {
		at, err := formatTime(p.At)
		if err != nil {
			return "", fmt.Errorf("encode history: %w", err)
		}
		rep, err := formatTime(p.Replaced)
		if err != nil {
			return "", fmt.Errorf("encode history: %w", err)
		}
		out[i] = priorJSON{p.Value, p.Source, p.Mapping, p.Depth, at, rep}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode history: %w", err)
	}
	return string(b), nil
}

func decodeHistory(s string) ([]Prior, error) {
	var in []priorJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Prior, len(in))
	for i, p := range in {
		at, err := parseTime(p.At)
		if err != nil {
			return nil, fmt.Errorf("prior %d: at: %w", i, err)
		}
		rep, err := parseTime(p.Replaced)
		if err != nil {
			return nil, fmt.Errorf("prior %d: replaced: %w", i, err)
		}
		out[i] = Prior{p.Value, p.Source, p.Mapping, p.Depth, at, rep}
	}
	return out, nil
}

// encodeRecordColumns is what the fields, field_order and links columns
// hold for rec. A good record with its input text keeps the text alone
// (and a CSV record its header, which the text lacks): fields and links
// are "", read again from the text (decodeRecordColumns), which halves
// what a record costs on disk.
func encodeRecordColumns(rec Record) (fields, order, links string, err error) {
	if derivable(rec) {
		if rec.Format == FormatCSV {
			ob, err := json.Marshal(rec.Order)
			if err != nil {
				return "", "", "", fmt.Errorf("encode order: %w", err)
			}
			order = string(ob)
		}
		return "", order, "", nil
	}
	f := rec.Fields
	if f == nil {
		f = map[string]string{}
	}
	o, l := rec.Order, rec.Links
	if o == nil {
		o = []string{}
	}
	if l == nil {
		l = []string{}
	}
	var fb, ob, lb []byte
	if fb, err = json.Marshal(f); err != nil {
		return "", "", "", fmt.Errorf("encode fields: %w", err)
	}
	if ob, err = json.Marshal(o); err != nil {
		return "", "", "", fmt.Errorf("encode order: %w", err)
	}
	if lb, err = json.Marshal(l); err != nil {
		return "", "", "", fmt.Errorf("encode links: %w", err)
	}
	return string(fb), string(ob), string(lb), nil
}

// derivable says whether rec's fields, order and links are what its input
// text reads as (records.Parse), so that the text alone is kept: a good
// record read from a records file, with its text.
func derivable(rec Record) bool {
	return rec.Raw != nil && rec.Error == "" && (rec.Format == FormatCSV || rec.Format == FormatJSONL)
}

// decodeRecordColumns fills rec's Fields, Order and Links from their stored
// JSON, or from its input text when only that was kept, naming the column
// that is bad.
func decodeRecordColumns(rec *Record, fields, order, links string) error {
	rec.Fields, rec.Order, rec.Links = nil, nil, nil
	if fields == "" && links == "" {
		var header []string
		if order != "" {
			if err := json.Unmarshal([]byte(order), &header); err != nil {
				return fmt.Errorf("column field_order: %w", err)
			}
		}
		r, err := records.Parse(rec.Format, rec.Raw, header)
		if err != nil {
			return fmt.Errorf("column raw: %w", err)
		}
		rec.Fields, rec.Order, rec.Links = r.Fields, r.Order, r.Links
		return nil
	}
	if err := json.Unmarshal([]byte(fields), &rec.Fields); err != nil {
		return fmt.Errorf("column fields: %w", err)
	}
	if err := json.Unmarshal([]byte(order), &rec.Order); err != nil {
		return fmt.Errorf("column field_order: %w", err)
	}
	if err := json.Unmarshal([]byte(links), &rec.Links); err != nil {
		return fmt.Errorf("column links: %w", err)
	}
	if rec.Fields == nil {
		rec.Fields = map[string]string{}
	}
	return nil
}

// rawColumn is what the raw column holds for raw: NULL when the record has
// no raw text (an earlier build's, or a line over the size limit), which
// an empty blob would not say.
func rawColumn(raw []byte) any {
	if raw == nil {
		return nil
	}
	return raw
}

// outcomeJSON fixes the stored and exported shape of an Outcome.
type outcomeJSON struct {
	Reason string         `json:"reason"`
	Detail string         `json:"detail,omitempty"`
	Pages  int            `json:"pages_fetched"`
	Failed map[string]int `json:"pages_failed,omitempty"`
	Page   string         `json:"refused_page,omitempty"`
	Key    string         `json:"refused_key,omitempty"`
	Link   string         `json:"link,omitempty"`
	Depth  int            `json:"link_depth,omitempty"`
}

func toOutcomeJSON(o Outcome) outcomeJSON {
	return outcomeJSON{Reason: o.Reason, Detail: o.Detail, Pages: o.Pages, Failed: o.Failed, Page: o.Page, Key: o.Key, Link: o.Link, Depth: o.Depth}
}

func encodeOutcome(o Outcome) (string, error) {
	b, err := json.Marshal(toOutcomeJSON(o))
	if err != nil {
		return "", fmt.Errorf("encode outcome: %w", err)
	}
	return string(b), nil
}

func decodeOutcome(record, s string) (*Outcome, error) {
	var in outcomeJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	if in.Reason == "" {
		return nil, fmt.Errorf("outcome without a reason")
	}
	return &Outcome{Record: record, Reason: in.Reason, Detail: in.Detail, Pages: in.Pages, Failed: in.Failed, Page: in.Page, Key: in.Key,
		Link: in.Link, Depth: in.Depth}, nil
}
