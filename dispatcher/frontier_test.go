package dispatcher

import (
	"fmt"
	"testing"
	"time"
)

// TestHostLastBounded: past hostLastCap hand-over times, the oldest half
// is forgotten and the newest kept.
func TestHostLastBounded(t *testing.T) {
	w := newWindow()
	now := time.Now()
	for i := range hostLastCap + 100 {
		w.hostLast[fmt.Sprintf("h%d.example", i)] = handover{at: now.Add(time.Duration(i) * time.Millisecond)}
	}
	w.pruneHostLast(now.Add(time.Minute))
	if n := len(w.hostLast); n > hostLastCap/2+100 || n < hostLastCap/2 {
		t.Fatalf("%d hand-over times kept, want about half of %d", n, hostLastCap+100)
	}
	if _, ok := w.hostLast[fmt.Sprintf("h%d.example", hostLastCap+99)]; !ok {
		t.Error("the newest hand-over time was forgotten")
	}
	if _, ok := w.hostLast["h0.example"]; ok {
		t.Error("the oldest hand-over time was kept")
	}
}
