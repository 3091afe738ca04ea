package wire

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// The conditional-request fields (Task.ETag, Task.LastModified,
// Result.NotModified, Result.ETag, Result.LastModified) were added after
// the rest: they survive a round trip in both encodings, and frames
// written before them still decode, to zero values.
func TestConditionalFieldsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		kind Kind
		v    any
	}{
		{"task with both validators", KindTask, &Task{ID: "t1", Lease: 7, URL: "http://a.example/", Host: "a.example",
			ETag: `"abc"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}},
		{"task handing a host over", KindTask, &Task{ID: "t1", Lease: 7, URL: "http://a.example/", Host: "a.example", HostLast: at.Add(1500 * time.Millisecond)}},
		{"task with an etag only", KindTask, &Task{ID: "t1", Lease: 7, URL: "http://a.example/", ETag: `W/"weak"`}},
		{"not modified", KindResult, &Result{TaskID: "t1", Lease: 7, URL: "http://a.example/", Status: 304, FetchedAt: at,
			NotModified: true, ETag: `"abc"`}},
		{"fetched with validators", KindResult, &Result{TaskID: "t1", Lease: 7, URL: "http://a.example/", Status: 200, FetchedAt: at,
			Fields: []Field{{Mapping: "m", Name: "email", Values: []string{"a@b.example"}}},
			ETag:   `"def"`, LastModified: "Tue, 03 Jan 2006 15:04:05 GMT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame, err := Encode(c.kind, c.v)
			if err != nil {
				t.Fatal(err)
			}
			_, got, err := Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.v) {
				t.Fatalf("binary: got %#v\nwant %#v", got, c.v)
			}
			js, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(c.v).Elem()).Interface()
			if err := json.Unmarshal(js, back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.v) {
				t.Fatalf("json %s: got %#v\nwant %#v", js, back, c.v)
			}
		})
	}
}

func TestFramesWithoutConditionalFieldsDecode(t *testing.T) {
	// Written by an encoder that did not know the conditional fields.
	old := []byte("\x02\x04\x03\x02t1\x04\x0e\a\x11http://a.example/\t\ta.example\n\x02")
	_, v, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	want := &Task{ID: "t1", Lease: 7, URL: "http://a.example/", Host: "a.example", Depth: 1}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v, want %#v", v, want)
	}
	// And a task without validators still encodes to exactly those bytes,
	// so an older supervisor reads what a newer dispatcher sends.
	again, err := Encode(KindTask, want)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(old) {
		t.Fatalf("encoding changed:\n got %q\nwant %q", again, old)
	}
}

func TestConditionalFieldsOfTheWrongType(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
	}{
		{"task etag as a varint", []byte{Version, byte(KindTask), taskETag<<1 | typeVarint, 2}},
		{"task last-modified as a varint", []byte{Version, byte(KindTask), taskLastMo<<1 | typeVarint, 2}},
		{"result not-modified as bytes", []byte{Version, byte(KindResult), resNotMod<<1 | typeBytes, 0}},
		{"result etag as a varint", []byte{Version, byte(KindResult), resETag<<1 | typeVarint, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Decode(c.frame); err == nil {
				t.Fatal("decoded")
			}
		})
	}
}
