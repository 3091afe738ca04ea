package learn

import (
	"context"
	"fmt"
	"sync"
)

// fetchJob is one teacher page to fetch, and what came of it.
type fetchJob struct {
	url      string
	teachers []int // indices of the teachers linking to it
	depth    int   // links from a teacher's own link (the depth search)
	page     *Page
	err      error
}

// fetchAll fetches each host's pages in order, one page at a time per
// host, opts.Hosts hosts at once. It returns early only when ctx ends;
// a page that fails keeps its error.
func fetchAll(ctx context.Context, src Source, hosts []string, jobs [][]fetchJob, opts Options) error {
	total := 0
	for _, j := range jobs {
		total += len(j)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	sem := make(chan struct{}, opts.Hosts)
	for i := range hosts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func(hj []fetchJob) {
			defer wg.Done()
			defer func() { <-sem }()
			for k := range hj {
				if ctx.Err() != nil {
					return
				}
				hj[k].page, hj[k].err = src.Fetch(ctx, hj[k].url)
				// Progress is told under the lock: its callers need not
				// be safe for concurrent use.
				mu.Lock()
				done++
				if opts.Progress != nil && (done%10 == 0 || done == total) {
					opts.Progress(progress(src, done, total))
				}
				mu.Unlock()
			}
		}(jobs[i])
	}
	wg.Wait()
	return ctx.Err()
}

// progress says how far fetching is: how many pages were had, and of a
// KeptSource how many of them were read from the kept pages rather than
// fetched.
func progress(src Source, done, total int) string {
	if k, ok := src.(*KeptSource); ok {
		c := k.Counts()
		return fmt.Sprintf("had %d of %d pages: %d read from kept pages, %d fetched, %d failed", done, total, c.Kept, c.Fetched, c.Failed)
	}
	return fmt.Sprintf("fetched %d of %d pages", done, total)
}
