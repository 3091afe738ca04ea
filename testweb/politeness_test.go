package testweb

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestCheckPoliteness(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// req is a request to host for path arriving at a seconds, its
	// response ending at b seconds (b < 0: still open).
	req := func(host, path string, a, b float64) Request {
		r := Request{Host: host, Path: path, Time: at(a)}
		if b >= 0 {
			r.Done = at(b)
		}
		return r
	}
	delay := func(host string) time.Duration {
		if host == "slow.example" {
			return 10 * time.Second
		}
		return 2 * time.Second
	}
	for _, tc := range []struct {
		name      string
		log       []Request
		repeated  []string
		under     []time.Duration // the gaps of the intervals under the delay
		open      int             // of them, after a response still open
		shortest  time.Duration
		intervals int
	}{
		{name: "empty"},
		{
			name: "every gap the delay or more, from the end of the response",
			log: []Request{
				req("a.example", "/robots.txt", 0, 0.1), req("a.example", "/", 2.1, 3),
				req("b.example", "/robots.txt", 1, 1.5), req("a.example", "/p/1", 5, 5.5),
				req("b.example", "/", 3.5, 4),
			},
			shortest:  2 * time.Second,
			intervals: 3,
		},
		{
			name: "arrival to arrival is not enough: the delay runs from the response's end",
			log: []Request{
				req("slow.example", "/robots.txt", 0, 6), req("slow.example", "/", 10, 16),
				req("slow.example", "/p/1", 26, 32),
			},
			under:     []time.Duration{4 * time.Second},
			shortest:  4 * time.Second,
			intervals: 2,
		},
		{
			name: "a request twice, the second while the first is being answered",
			log: []Request{
				req("slow.example", "/p/1", 0, 6), req("slow.example", "/p/1", 5, 11),
				req("slow.example", "/p/2", 21, 22),
			},
			repeated:  []string{"slow.example/p/1"},
			under:     []time.Duration{-time.Second},
			shortest:  -time.Second,
			intervals: 2,
		},
		{
			name: "the response that ended last is the one to wait on",
			log: []Request{
				req("a.example", "/p/1", 0, 9), req("a.example", "/p/2", 1, 2),
				req("a.example", "/p/3", 10, 11),
			},
			under:     []time.Duration{-8 * time.Second, time.Second},
			shortest:  -8 * time.Second,
			intervals: 2,
		},
		{
			name: "after a response never ended, every request is under",
			log: []Request{
				req("a.example", "/p/1", 0, -1), req("a.example", "/p/2", 60, 61),
				req("a.example", "/p/2", 70, 71),
			},
			repeated:  []string{"a.example/p/2"},
			under:     []time.Duration{0, 0},
			open:      2,
			intervals: 2,
		},
		{
			name: "out of order in the log: checked in arrival order",
			log: []Request{
				req("a.example", "/p/2", 3, 3.5), req("a.example", "/p/1", 0, 1),
			},
			shortest:  2 * time.Second,
			intervals: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := CheckPoliteness(tc.log, delay)
			if p.Requests != len(tc.log) || p.Intervals != tc.intervals {
				t.Errorf("%d requests, %d intervals; want %d and %d", p.Requests, p.Intervals, len(tc.log), tc.intervals)
			}
			if got := p.RepeatedURLs(); strings.Join(got, " ") != strings.Join(tc.repeated, " ") {
				t.Errorf("repeated %q, want %q", got, tc.repeated)
			}
			if len(p.Under) != len(tc.under) {
				t.Fatalf("under the delay: %+v, want gaps %v", p.Under, tc.under)
			}
			open := 0
			for i, iv := range p.Under {
				if iv.Gap != tc.under[i] {
					t.Errorf("interval %d under the delay: gap %s, want %s", i, iv.Gap, tc.under[i])
				}
				if iv.Open {
					open++
				}
			}
			if open != tc.open {
				t.Errorf("%d intervals after an open response, want %d", open, tc.open)
			}
			if p.Shortest.Gap != tc.shortest {
				t.Errorf("shortest %s, want %s", p.Shortest.Gap, tc.shortest)
			}
			if s := p.String(); !strings.Contains(s, "requests") {
				t.Errorf("String() = %q", s)
			}
		})
	}
}

// The web's log records when each response ended, after its latency and
// body, so a host's delay can be measured from there.
func TestLogRecordsResponseEnd(t *testing.T) {
	const latency = 50 * time.Millisecond
	w, err := Start(Options{Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	resp, err := newClient(t, w).Get("http://people.example/p/alice")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The end is logged before the response is written, so it is in the
	// log once the client has the response.
	log := w.Log()
	if len(log) != 1 {
		t.Fatalf("log %+v, want one request", log)
	}
	if r := log[0]; r.Done.Sub(r.Time) < latency || r.Status != 200 {
		t.Errorf("request at %s, response ended at %s with status %d: want the end at least %s after the arrival",
			r.Time, r.Done, r.Status, latency)
	}
}
