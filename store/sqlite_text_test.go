package store

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"backfill/records"
)

// TestSQLiteKeepsRecordText: a record read from a records file is kept as
// its text alone (the fields and links columns empty, a CSV record's
// header beside it), and reads back with the fields, keys and links the
// reader gave it, in both formats; a malformed line and a record without
// text keep their columns as given.
func TestSQLiteKeepsRecordText(t *testing.T) {
	ctx := context.Background()
	st, err := openSQLite(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*sqliteStore)
	var put []Record
	for _, f := range []struct{ name, data string }{
		{"in.csv", "id,name,homepage,links\nc1, Ada ,https://a.example/x,\"https://b.example/ https://c.example/\"\nc2,Bob,,\nc3,\"Cy\r\nJr\",\n"},
		{"in.jsonl", "{\"id\": 7, \"name\": \" Dee \", \"tags\": [\"https://d.example/\", 1], \"o\": {\"k\": null}, \"links\": \"https://e.example/\"}\n{\"a\":1,\"a\":2}\n"},
	} {
		err := records.Read(f.name, strings.NewReader(f.data), records.FormatAuto, records.DefaultID, func(r records.Record) error {
			put = append(put, Record{ID: r.ID, Seq: int64(len(put) + 1), Format: r.Format, Raw: r.Raw, Fields: r.Fields, Order: r.Order, Links: r.Links, Error: r.Error})
			return nil
		}, func(*records.LineError) {}, func(*records.LineError) {})
		if err != nil {
			t.Fatal(err)
		}
	}
	old := Record{ID: "old", Seq: int64(len(put) + 1), Fields: map[string]string{"name": "Eve"}, Order: []string{"name"}, Links: []string{"https://f.example/"}}
	put = append(put, old)
	if err := st.PutRecords(ctx, put); err != nil {
		t.Fatal(err)
	}
	for _, want := range put {
		var fields, order, links string
		if err := s.w.QueryRowContext(ctx, `SELECT fields, field_order, links FROM records WHERE id = ?`, want.ID).Scan(&fields, &order, &links); err != nil {
			t.Fatal(err)
		}
		textOnly := want.Raw != nil && want.Error == ""
		if textOnly != (fields == "" && links == "") || (want.Format == FormatJSONL && textOnly && order != "") {
			t.Errorf("record %q: columns fields=%q field_order=%q links=%q", want.ID, fields, order, links)
		}
		got, err := st.Record(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want.Error == "" && (!reflect.DeepEqual(got.Fields, want.Fields) || !reflect.DeepEqual(got.Order, want.Order) || !reflect.DeepEqual(got.Links, want.Links)) {
			t.Errorf("record %q read back as\n%q %q %q\nwant\n%q %q %q", want.ID, got.Fields, got.Order, got.Links, want.Fields, want.Order, want.Links)
		}
		if string(got.Raw) != string(want.Raw) || got.Error != want.Error {
			t.Errorf("record %q: raw %q error %q, want %q %q", want.ID, got.Raw, got.Error, want.Raw, want.Error)
		}
	}
	// A text that no longer reads (a hand edit) is an error naming the
	// record and the column, not a record without fields.
	if _, err := s.w.ExecContext(ctx, `UPDATE records SET raw = CAST('{"id": 7,' AS BLOB) WHERE id = '7'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Record(ctx, "7"); err == nil || !strings.Contains(err.Error(), `record "7": column raw`) {
		t.Errorf("a broken text read back: %v", err)
	}
}
