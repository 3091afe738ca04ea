package records

import (
	"bytes"
	"encoding/csv"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSplitCSVRecord(t *testing.T) {
	tests := []struct {
		raw  string
		want []string
		err  error
	}{
		{"", []string{""}, nil},
		{"a,b,c", []string{"a", "b", "c"}, nil},
		{" a , b ", []string{" a ", " b "}, nil},
		{",,", []string{"", "", ""}, nil},
		{`"a,b","c""d",""`, []string{"a,b", `c"d`, ""}, nil},
		{"\"line\r\nbreak\",x", []string{"line\r\nbreak", "x"}, nil},
		{"caf\xc3\xa9,\xff", []string{"café", "\xff"}, nil},
		{`a"b,c`, nil, ErrBareQuote},
		{`"a"b,c`, nil, ErrQuote},
		{`"open`, nil, ErrQuote},
		{`x,"open`, nil, ErrQuote},
	}
	for _, tc := range tests {
		got, err := SplitCSVRecord([]byte(tc.raw))
		if !errors.Is(err, tc.err) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitCSVRecord(%q) = %q, %v; want %q, %v", tc.raw, got, err, tc.want, tc.err)
		}
	}
}

// FuzzSplitCSVRecord checks SplitCSVRecord against encoding/csv on
// one-line records (a record's text has no line break outside quotes, and
// encoding/csv drops the \r of a quoted \r\n, so inputs with either are
// left out of the comparison), and that what csv.Writer writes of its cells splits back
// into the same cells.
func FuzzSplitCSVRecord(f *testing.F) {
	for _, s := range []string{"a,b", `"a,b",c`, `"a""b"`, `a"b`, "\"x\ny\",z", "", ",", `"`, "\xff,\"\xfe\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cells, err := SplitCSVRecord(raw)
		if !bytes.ContainsAny(raw, "\r\n") && len(raw) > 0 {
			r := csv.NewReader(bytes.NewReader(raw))
			r.FieldsPerRecord = -1
			all, cerr := r.ReadAll()
			if cerr == nil && len(all) == 1 && err == nil && !reflect.DeepEqual(all[0], cells) {
				t.Fatalf("SplitCSVRecord(%q) = %q, encoding/csv reads %q", raw, cells, all[0])
			}
			if cerr == nil && len(all) == 1 && err != nil {
				t.Fatalf("SplitCSVRecord(%q) failed (%v), encoding/csv reads %q", raw, err, all[0])
			}
		}
		if err != nil {
			return
		}
		var out bytes.Buffer
		w := csv.NewWriter(&out)
		if err := w.Write(cells); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		again, err := SplitCSVRecord(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
		if err != nil || !reflect.DeepEqual(again, cells) {
			t.Fatalf("cells %q written as %q split back into %q, %v", cells, out.Bytes(), again, err)
		}
	})
}

func TestJSONMembersAndSplice(t *testing.T) {
	raw := []byte(`{ "id" : 7, "n":1e3,"big": 12345678901234567890, "f": 0.10, "l": [1, "a"], "o": {"x": null}, "e": "", "na\u006de": "x" }`)
	members, end, err := JSONMembers(raw)
	if err != nil {
		t.Fatal(err)
	}
	var keys, vals []string
	for _, m := range members {
		keys = append(keys, m.Key)
		vals = append(vals, string(raw[m.Start:m.End]))
		if string(m.Value) != string(raw[m.Start:m.End]) {
			t.Errorf("member %q: value %s, span %s", m.Key, m.Value, raw[m.Start:m.End])
		}
	}
	if want := "id n big f l o e name"; strings.Join(keys, " ") != want {
		t.Errorf("keys %q, want %q", keys, want)
	}
	if want := `7|1e3|12345678901234567890|0.10|[1, "a"]|{"x": null}|""|"x"`; strings.Join(vals, "|") != want {
		t.Errorf("values %s, want %s", strings.Join(vals, "|"), want)
	}
	if raw[end] != '}' || end != len(raw)-1 {
		t.Errorf("end %d, want the closing brace at %d", end, len(raw)-1)
	}

	out, err := SpliceJSON(raw, map[string][]byte{"e": []byte(`"filled"`), "name": []byte(`42`)}, []string{`"new"`}, [][]byte{[]byte(`[1,2]`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{ "id" : 7, "n":1e3,"big": 12345678901234567890, "f": 0.10, "l": [1, "a"], "o": {"x": null}, "e": "filled", "na\u006de": 42 ,"new":[1,2]}`
	if string(out) != want {
		t.Errorf("splice:\ngot  %s\nwant %s", out, want)
	}
	if out, err := SpliceJSON([]byte(`{}`), nil, []string{`"a"`, `"b"`}, [][]byte{[]byte(`1`), []byte(`null`)}); err != nil || string(out) != `{"a":1,"b":null}` {
		t.Errorf("splice into {} = %s, %v", out, err)
	}

	for _, bad := range []string{`[1]`, `{"a":1,"a":2}`, `{"a":1} x`, `{"a":`, `"s"`} {
		if _, _, err := JSONMembers([]byte(bad)); err == nil {
			t.Errorf("JSONMembers(%s) succeeded", bad)
		}
	}
}

// FuzzJSONMembers holds the fast split of a valid object (validMembers)
// to the decoder's reading of the same text: the same keys, values,
// spans and closing brace, and it never takes what the decoder refuses.
func FuzzJSONMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 } `, `{"a":"x\"}","b":[1,{"c":"]"}],"d":null}`, `{"a\u0062":-0.5e3,"t":true}`,
		`{"a":1,"a":2}`, `{"a":1} x`, `[1]`, `{"a":"caf` + "\xe9" + `"}`, `{"k":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, fastEnd, ok := validMembers(raw)
		slow, slowEnd, err := decodeMembers(raw)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("%q: split %v, the decoder refuses it: %v", raw, fast, err)
		}
		if fastEnd != slowEnd || len(fast) != len(slow) {
			t.Fatalf("%q: split %v end %d, decoder %v end %d", raw, fast, fastEnd, slow, slowEnd)
		}
		for i := range fast {
			a, b := fast[i], slow[i]
			if a.Key != b.Key || !bytes.Equal(a.Value, b.Value) || a.Start != b.Start || a.End != b.End {
				t.Fatalf("%q: member %d split %+v, decoder %+v", raw, i, a, b)
			}
		}
	})
}
