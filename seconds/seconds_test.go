package seconds

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

func TestAttr(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{14 * time.Millisecond, 0.014},
		{2 * time.Minute, 120},
		{1500 * time.Microsecond, 0.0015},
		{100*time.Millisecond + 400, 0.1000004},
		{-3 * time.Second, -3},
	}
	for _, c := range cases {
		var b bytes.Buffer
		slog.New(slog.NewJSONHandler(&b, nil)).Info("m", Attr("waited", c.d))
		var line map[string]any
		if err := json.Unmarshal(b.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if got, ok := line["waited_seconds"].(float64); !ok || got != c.want {
			t.Errorf("Attr(%v) logged %s, want waited_seconds %v", c.d, b.Bytes(), c.want)
		}
		if _, ok := line["waited"]; ok {
			t.Errorf("Attr(%v) logged the bare name: %s", c.d, b.Bytes())
		}
	}
}

// TestDurationReadsOfBack: a duration written with Of reads back whole.
func TestDurationReadsOfBack(t *testing.T) {
	for _, d := range []time.Duration{0, 14 * time.Millisecond, 100*time.Millisecond + 400, 2 * time.Minute, -3 * time.Second, 1234567890123} {
		if got := Duration(Of(d)); got != d {
			t.Errorf("Duration(Of(%v)) = %v", d, got)
		}
	}
}
