package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextDoublesWithinJitter(t *testing.T) {
	tests := []struct {
		name       string
		first, max time.Duration
		steps      []time.Duration // the step each Next centres on
	}{
		{"doubles to max", 100 * time.Millisecond, time.Second,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}},
		{"max below first", time.Second, time.Millisecond, []time.Duration{time.Second, time.Second}},
		{"zero first", 0, 4 * time.Millisecond, []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 50 { // jitter is random: many draws
				b := New(tt.first, tt.max)
				for i, step := range tt.steps {
					if got := b.Peek(); got != step {
						t.Fatalf("round %d pause %d: step %v, want %v", round, i, got, step)
					}
					d := b.Next()
					if d < step/2 || d >= step*3/2 {
						t.Fatalf("round %d pause %d: %v outside [%v, %v)", round, i, d, step/2, step*3/2)
					}
				}
			}
		})
	}
}

func TestJitterSpreads(t *testing.T) {
	// Two processes that failed together must not retry together: the
	// pauses of one step take many values.
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[New(time.Second, time.Second).Next()] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 pauses took only %d values", len(seen))
	}
}

func TestReset(t *testing.T) {
	b := New(10*time.Millisecond, time.Second)
	b.Next()
	b.Next()
	b.Reset()
	if got := b.Peek(); got != 10*time.Millisecond {
		t.Fatalf("after Reset the step is %v, want 10ms", got)
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if New(time.Hour, time.Hour).Wait(ctx) {
		t.Fatal("Wait reported a full pause on a cancelled context")
	}
	if !Sleep(context.Background(), time.Microsecond) {
		t.Fatal("Sleep of 1µs did not pass")
	}
}
