package dispatcher

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// TestMemberRate: a member's rate is its pages per second between
// heartbeats, smoothed, and survives the counters restarting.
func TestMemberRate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	beat := func(sec int, fetched, failed int64) *wire.Heartbeat {
		return &wire.Heartbeat{Fetched: fetched, Failed: failed, At: t0.Add(time.Duration(sec) * time.Second)}
	}
	tests := []struct {
		name  string
		beats []*wire.Heartbeat
		want  float64
	}{
		{"first beat has no rate", []*wire.Heartbeat{beat(0, 10, 0)}, 0},
		{"one interval", []*wire.Heartbeat{beat(0, 10, 0), beat(2, 30, 0)}, 10},
		{"failures count", []*wire.Heartbeat{beat(0, 0, 0), beat(2, 10, 10)}, 10},
		{"smoothed", []*wire.Heartbeat{beat(0, 0, 0), beat(2, 40, 0), beat(4, 40, 0)}, 10},
		{"stale beat ignored", []*wire.Heartbeat{beat(0, 0, 0), beat(2, 40, 0), beat(1, 0, 0)}, 20},
		{"restarted counters", []*wire.Heartbeat{beat(0, 0, 0), beat(2, 40, 0), beat(4, 10, 0)}, 12.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m member
			for _, b := range tc.beats {
				m.beat(b)
			}
			if math.Abs(m.rate-tc.want) > 1e-9 {
				t.Errorf("rate = %v, want %v", m.rate, tc.want)
			}
		})
	}
}

// TestStatusFileRoundTrip: what writeStatus writes, ReadStatus reads back,
// and no temporary file is left beside it.
func TestStatusFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := Status{Dispatcher: "d", Run: "r", State: StateRunning, Updated: at, Records: 3, Complete: 1,
		Members: []MemberStatus{{Name: "s1", Capacity: 8, InFlight: 2, Rate: 1.5, Joined: at, LastSeen: at}},
		Left:    []MemberStatus{{Name: "s2", Left: at, Reason: "silent"}}}
	for range 2 { // the second write replaces the first
		if err := writeStatus(dir, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Members[0] != want.Members[0] || got.Left[0] != want.Left[0] || got.Records != 3 || got.State != StateRunning {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != StatusFile {
		t.Errorf("directory holds %v, want only %s", entries, StatusFile)
	}
	if _, err := ReadStatus(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStatus of an empty directory: %v, want not-exist", err)
	}
}

// TestStatusHidesInProcessEndpoints: a dispatcher listening in process
// (`backfill run`) shows no inproc:// address in its status (its name
// and endpoint), which means nothing outside the process.
func TestStatusHidesInProcessEndpoints(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) { c.Listen = "inproc://backfill-status-test" })
	s := e.d.Status()
	if strings.Contains(s.Dispatcher, "inproc") || s.Endpoint != "" || s.Dispatcher == "" {
		t.Errorf("status dispatcher %q endpoint %q: want the host alone and no endpoint", s.Dispatcher, s.Endpoint)
	}
}
