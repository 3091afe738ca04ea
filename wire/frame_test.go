package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		kind Kind
		v    any
	}{
		{KindHello, &Hello{Supervisor: "s1", Endpoint: "tcp://127.0.0.1:6000", Capacity: 64, Render: true, Mappings: "abc", Started: at}},
		{KindHeartbeat, &Heartbeat{Hello: Hello{Supervisor: "s1", Capacity: 8, Started: at}, InFlight: 3, Fetched: 10, Failed: 1, RSS: 1 << 20, At: at, Surveys: []string{"w:127.1.0.1"}}},
		{KindWelcome, &Welcome{Dispatcher: "d", Run: "r1"}},
		{KindBye, &Bye{Dispatcher: "d", Run: "r1"}},
		{KindWelcome, &Welcome{Dispatcher: "d", Run: "r1", Seq: 7, Lease: 20 * time.Second}},
		{KindRenew, &Renew{Seq: 8, Lease: 20 * time.Second}},
		{KindHello, &Hello{Supervisor: "s1", Endpoint: "tcp://127.0.0.1:6000", Capacity: 8, Started: at, Seq: 3, MaxRequest: 30 * time.Second}},
		{KindTask, &Task{ID: "t1", Lease: 7, URL: "http://a.example/", Host: "a.example", Depth: 1}},
		{KindResult, &Result{TaskID: "t1", Lease: 7, Supervisor: "s1", URL: "http://a.example/", Status: 200, FetchedAt: at,
			Fields: []Field{{Mapping: "m", Name: "name", Values: []string{"Ána"}, Match: true}},
			Links:  []Link{{URL: "http://b.example/", Parsed: true}, {URL: "http://b.example/ada", Text: "Ada Lovelace"}}}},
		{KindResult, &Result{TaskID: "t2", Lease: 8, URL: "http://c.example/", Status: 200, FetchedAt: at,
			TextHash: []byte{0: 0xde, 7: 0xad, 15: 0xff}, Simhash: 1<<63 | 0xfeed, Words: 512}},
		{KindResult, &Result{TaskID: "t3", Lease: 9, URL: "http://d.example/", Status: 200, FetchedAt: at, Mappings: []string{"m"}, JSOnly: true}},
		{KindTask, &Task{ID: "t4", Lease: 10, URL: "http://e.example/", Host: "e.example", Hops: 3}},
		{KindResult, &Result{TaskID: "t4", Lease: 10, URL: "http://e.example/", FinalURL: "http://e.example/b", Status: 301, FetchedAt: at,
			Chain: []string{"http://e.example/", "http://e.example/a"}, Redirect: "https://f.example/", HopRefused: RedirectLoop, TLSError: "x509: certificate signed by unknown authority", Delay: 15 * time.Second, Ready: 14900 * time.Millisecond}},
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			frame, err := Encode(c.kind, c.v)
			if err != nil {
				t.Fatal(err)
			}
			kind, got, err := Decode(frame)
			if err != nil {
				t.Fatal(err)
			}
			if kind != c.kind {
				t.Fatalf("kind %v, want %v", kind, c.kind)
			}
			if !reflect.DeepEqual(got, c.v) {
				t.Fatalf("got %#v\nwant %#v", got, c.v)
			}
		})
	}
}

func TestEncodeRefusesMismatchedKind(t *testing.T) {
	if _, err := Encode(KindTask, Hello{}); err == nil {
		t.Fatal("Encode(KindTask, Hello) succeeded")
	}
}

func TestDecodeRefusesBadFrames(t *testing.T) {
	task, err := Encode(KindTask, Task{ID: "x", URL: "http://a.example/"})
	if err != nil {
		t.Fatal(err)
	}
	hello, err := Encode(KindHello, Hello{Supervisor: "s"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"empty", nil, "too short"},
		{"one byte", []byte{Version}, "too short"},
		{"wrong version", append([]byte{Version + 1}, task[1:]...), "version"},
		// Year 0 an hour east of Greenwich is year -1 in UTC, which no
		// timestamp can be written in: found by FuzzDecode.
		{"time out of range", append([]byte{Version, byte(KindSurveyResult)}, `{"at":"0000-01-01T00:00:00+01:00"}`...), "out of range"},
		{"old version", append([]byte{1}, task[1:]...), "version"},
		{"unknown kind", []byte{Version, 200, '{', '}'}, "unknown kind"},
		{"zero kind", []byte{Version, 0, '{', '}'}, "unknown kind"},
		{"task cut short", task[:len(task)-4], "task body"},
		{"task garbage", []byte{Version, byte(KindTask), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "task body"},
		{"task field of the wrong type", []byte{Version, byte(KindTask), taskURL<<1 | typeVarint, 2}, "want bytes"},
		{"task length past the end", []byte{Version, byte(KindTask), taskURL<<1 | typeBytes, 100, 'a'}, "truncated"},
		{"result field of the wrong type", []byte{Version, byte(KindResult), resField<<1 | typeVarint, 2}, "want bytes"},
		{"result text hash of the wrong type", []byte{Version, byte(KindResult), resTextHash<<1 | typeVarint, 2}, "want bytes"},
		{"result simhash of the wrong type", []byte{Version, byte(KindResult), resSimhash<<1 | typeBytes, 0}, "want a varint"},
		{"result nested garbage", []byte{Version, byte(KindResult), resLink<<1 | typeBytes, 2, linkURL<<1 | typeBytes, 9}, "truncated"},
		{"json garbage", []byte{Version, byte(KindHello), 0xff, 0xfe}, "hello body"},
		{"json trailing data", append(append([]byte{}, hello...), []byte(`{"supervisor":"y"}`)...), "trailing"},
		{"json wrong field type", []byte("\x02\x01{\"capacity\":\"many\"}"), "hello body"},
		{"huge", append([]byte{Version, byte(KindTask)}, bytes.Repeat([]byte{' '}, MaxFrame)...), "over"},
		{"hello of a megabyte", append([]byte("\x02\x01{\"supervisor\":\""), bytes.Repeat([]byte{'x'}, 1<<20)...), "limit of its kind"},
		{"heartbeat of two megabytes", append([]byte{Version, byte(KindHeartbeat)}, bytes.Repeat([]byte{' '}, 2<<20)...), "limit of its kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode(c.frame)
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("err = %v, want ErrBadFrame", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q, want it to mention %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, k := range []Kind{KindHello, KindHeartbeat, KindWelcome, KindTask, KindResult, KindSurveyTask, KindSurveyResult, KindBye} {
		f.Add(append([]byte{Version, byte(k)}, []byte(`{}`)...))
	}
	f.Add([]byte{Version, byte(KindResult), '{', '"', 'f', 'i', 'e', 'l', 'd', 's', '"', ':', '['})
	f.Add([]byte{0, 0})
	if b, err := Encode(KindResult, &Result{TaskID: "t", TextHash: make([]byte, 16), Simhash: 1 << 63, Words: 40}); err == nil {
		f.Add(b)
	}
	if b, err := Encode(KindResult, &Result{TaskID: "t", Links: []Link{{URL: "http://a.example/p/1", Parsed: true, Text: "Ána Lee"}}}); err == nil {
		f.Add(b) // a link's anchor text
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		kind, v, err := Decode(frame)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error does not wrap ErrBadFrame: %v", err)
			}
			return
		}
		// Whatever decodes must encode again and decode to the same value.
		again, err := Encode(kind, v)
		if err != nil {
			t.Fatalf("re-encode %s: %v", kind, err)
		}
		kind2, v2, err := Decode(again)
		if err != nil || kind2 != kind || !reflect.DeepEqual(v, v2) {
			t.Fatalf("round trip changed the message: %v %#v %#v", err, v, v2)
		}
	})
}

// A newer peer may add fields: an older decoder skips numbers it does not
// know, of either type, and keeps the rest.
func TestDecodeSkipsUnknownFields(t *testing.T) {
	frame, err := Encode(KindResult, Result{TaskID: "t", Lease: 3, Links: []Link{{URL: "http://a.example/"}}})
	if err != nil {
		t.Fatal(err)
	}
	var extra enc
	extra.varint(99, 12345)
	extra.string(100, "from the future")
	var link enc
	link.string(linkURL, "http://b.example/")
	link.string(7, "unknown inside a link")
	extra.bytes(resLink, link)
	_, v, err := Decode(append(frame, extra...))
	if err != nil {
		t.Fatal(err)
	}
	r := v.(*Result)
	if r.TaskID != "t" || r.Lease != 3 || len(r.Links) != 2 || r.Links[1].URL != "http://b.example/" {
		t.Fatalf("decoded %+v", r)
	}
}

func BenchmarkResultCodec(b *testing.B) {
	r := Result{TaskID: "0123456789abcdef", Lease: 1234567, Supervisor: "crawler-1", URL: "http://people.example/p/0001",
		Status: 200, Bytes: 4321, FetchedAt: time.Now().UTC(), Mappings: []string{"testweb-people"},
		Fields: []Field{{Mapping: "testweb-people", Name: "name", Values: []string{"Ada Lovelace"}, Match: true},
			{Mapping: "testweb-people", Name: "location", Values: []string{"London, United Kingdom"}}}}
	for i := range 20 {
		r.Links = append(r.Links, Link{URL: fmt.Sprintf("http://people.example/p/%04d", i), Parsed: i < 3})
	}
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, _ := Encode(KindResult, &r)
			if _, _, err := Decode(f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, _ := json.Marshal(&r)
			var out Result
			if err := json.Unmarshal(f, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
