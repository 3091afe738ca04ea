package supervisor

import (
	"sync"
	"testing"
	"time"
)

// TestParseBounded: however many workers finish pages at once, no more
// than the slots' worth of extractions run together, and every one runs.
// The extractions hold on until the test lets them go: once as many as
// there are slots are in, no other may come in.
func TestParseBounded(t *testing.T) {
	// settle is how long the test watches for an extraction beyond the
	// slots; a bound that does not hold lets one in at once.
	const settle = 100 * time.Millisecond
	cases := []struct {
		name         string
		slots, pages int
	}{
		{"one slot", 1, 8},
		{"the CPUs' slots", extractSlots(), 4 * extractSlots()},
		{"more slots than pages", 8, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Supervisor{extracting: make(chan struct{}, tc.slots)}
			in := make(chan struct{}, tc.pages)
			out := make(chan struct{})
			var wg sync.WaitGroup
			for range tc.pages {
				wg.Go(func() {
					s.parse(func() {
						in <- struct{}{}
						<-out // held until the test lets this one go
					})
				})
			}
			full := min(tc.slots, tc.pages)
			for range full {
				<-in
			}
			select {
			case <-in:
				t.Errorf("an extraction came in while %d held the %d slots", full, tc.slots)
				full++
			case <-time.After(settle):
			}
			// Let them go one at a time; each lets one more in.
			for i := range tc.pages {
				out <- struct{}{}
				if i+full < tc.pages {
					<-in
				}
			}
			wg.Wait()
			if len(s.extracting) != 0 {
				t.Errorf("%d slots still held after every extraction", len(s.extracting))
			}
		})
	}
}
