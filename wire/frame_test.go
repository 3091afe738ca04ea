package wire

import (
	"bytes"
	"errors"
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
		{KindHeartbeat, &Heartbeat{Hello: Hello{Supervisor: "s1", Capacity: 8, Started: at}, InFlight: 3, Fetched: 10, Failed: 1, RSS: 1 << 20, At: at}},
		{KindWelcome, &Welcome{Dispatcher: "d", Run: "r1"}},
		{KindTask, &Task{ID: "t1", Lease: 7, URL: "http://a.example/", Host: "a.example", Depth: 1}},
		{KindResult, &Result{TaskID: "t1", Lease: 7, Supervisor: "s1", URL: "http://a.example/", Status: 200, FetchedAt: at,
			Fields: []Field{{Mapping: "m", Name: "name", Values: []string{"Ána"}, Match: true}},
			Links:  []Link{{URL: "http://b.example/", Parsed: true}}}},
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
	good, err := Encode(KindTask, Task{ID: "x"})
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
		{"wrong version", append([]byte{Version + 1}, good[1:]...), "version"},
		{"unknown kind", []byte{Version, 200, '{', '}'}, "unknown kind"},
		{"zero kind", []byte{Version, 0, '{', '}'}, "unknown kind"},
		{"garbage body", []byte{Version, byte(KindTask), 0xff, 0xfe}, "task body"},
		{"truncated", good[:len(good)-4], "task body"},
		{"trailing data", append(append([]byte{}, good...), []byte(`{"id":"y"}`)...), "trailing"},
		{"wrong field type", []byte("\x01\x04{\"depth\":\"deep\"}"), "task body"},
		{"huge", append([]byte{Version, byte(KindTask)}, bytes.Repeat([]byte{' '}, MaxFrame)...), "over"},
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
	for _, k := range []Kind{KindHello, KindHeartbeat, KindWelcome, KindTask, KindResult} {
		f.Add(append([]byte{Version, byte(k)}, []byte(`{}`)...))
	}
	f.Add([]byte{Version, byte(KindResult), '{', '"', 'f', 'i', 'e', 'l', 'd', 's', '"', ':', '['})
	f.Add([]byte{0, 0})
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
