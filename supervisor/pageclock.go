package supervisor

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pageClock splits a render's time in two: the time the page's requests
// spend waiting for their hosts' turns and being fetched (while at least
// one of them is out), bounded by waitMax, and the rest, the page's own
// time, bounded by activeMax. A host's delay is the crawl being polite, not
// the page being slow: it must not use up the page's deadline, which with
// delays of seconds per request it would.
type pageClock struct {
	activeMax, waitMax time.Duration
	start              time.Time

	mu     sync.Mutex
	out    int           // requests out now
	since  time.Time     // when out last went from 0 to 1
	waited time.Duration // earlier stretches with requests out
}

// pageLate is the cause a render is cancelled with when its clock runs
// out.
type pageLate struct{ msg string }

func (e *pageLate) Error() string { return e.msg }

func newPageClock(activeMax, waitMax time.Duration) *pageClock {
	return &pageClock{activeMax: activeMax, waitMax: waitMax, start: time.Now()}
}

// send notes a request of the page going out; back, its answer coming in.
func (c *pageClock) send() {
	c.mu.Lock()
	if c.out == 0 {
		c.since = time.Now()
	}
	c.out++
	c.mu.Unlock()
}

func (c *pageClock) back() {
	c.mu.Lock()
	c.out--
	if c.out == 0 {
		c.waited += time.Since(c.since)
	}
	c.mu.Unlock()
}

// spent returns the page's own time and its requests' time so far.
func (c *pageClock) spent() (active, waited time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	waited = c.waited
	if c.out > 0 {
		waited += now.Sub(c.since)
	}
	return now.Sub(c.start) - waited, waited
}

func (c *pageClock) active() time.Duration {
	a, _ := c.spent()
	return a
}

func (c *pageClock) elapsed() time.Duration { return time.Since(c.start) }

// late says which limit the page has passed, or nil.
func (c *pageClock) late() error {
	active, waited := c.spent()
	switch {
	case active >= c.activeMax:
		return &pageLate{fmt.Sprintf("page not rendered within %v (its requests waited %v more for their hosts)", c.activeMax, waited.Round(time.Millisecond))}
	case waited >= c.waitMax:
		return &pageLate{fmt.Sprintf("the page's requests waited over %v for their hosts", c.waitMax)}
	}
	return nil
}

// watch cancels ctx with a *pageLate cause once a limit is passed, looking
// every renderIdlePoll, until stop is called (stop waits for it).
func (c *pageClock) watch(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(renderIdlePoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := c.late(); err != nil {
					cancel(err)
					return
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
