package supervisor

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"backfill/store"
)

// Kept pages. A page fetched and extracted is kept in Config.Pages (the
// crawl's store, shared by its supervisors) as the mappings read it, so
// that a rerun whose mappings changed extracts it anew without asking its
// host again (the dispatcher does, from the store). Workers hand a page
// to the keeper without waiting; its one goroutine writes what has come
// in, a batch at a time (gathered for up to keepGather when pages come
// slowly), and holds the kept pages under Config.KeepBytes
// by trimming them, oldest first, each time it has written bodies of an
// eighth of the bound (and when it starts, so a bound lowered since the last run
// holds at once). Several supervisors of one store each trim it: the
// pages kept pass the bound by at most an eighth of it per supervisor.
// Pages waiting to be written take at most keepQueueBytes; a page that
// would pass it is not kept (the store falls behind the crawl), and
// neither is one the store refuses: both are counted (Stats.Unkept) and
// the crawl goes on.

// keepQueueBytes bounds the bodies waiting for the keeper.
const keepQueueBytes = 32 << 20

// keepBatch bounds the pages one write of the keeper takes.
const keepBatch = 32

// keepGather is how long the keeper lets pages gather into a batch
// before it writes fewer than keepBatch. A crawl waiting on slow hosts
// fetches its pages one by one; written as they come, each would cost a
// transaction of its own (statements prepared, the log written and
// synced) for what a batch costs once. Pages are a cache for reruns,
// so a page kept this much later costs nothing; Run's stop still writes
// what waits at once.
const keepGather = 250 * time.Millisecond

// keepTrimShare: the keeper trims after writing 1/keepTrimShare of the
// bound.
const keepTrimShare = 8

type keeper struct {
	pages    store.Pages
	maxBytes int64
	queueMax int64         // keepQueueBytes
	gather   time.Duration // keepGather
	log      *slog.Logger
	// gathering, when set (by tests), is sent the pages waiting as a
	// gather begins.
	gathering chan<- int

	mu        sync.Mutex
	queue     []store.Page
	queued    int64 // body bytes in queue
	wake      chan struct{}
	sinceTrim int64

	kept, unkept atomic.Int64
	warned       atomic.Bool
}

// newKeeper returns the keeper of pages, nil when pages is nil (nothing
// is kept).
func newKeeper(pages store.Pages, maxBytes int64, log *slog.Logger) *keeper {
	if pages == nil {
		return nil
	}
	if maxBytes <= 0 {
		maxBytes = store.DefaultKeptBytes
	}
	return &keeper{pages: pages, maxBytes: maxBytes, queueMax: keepQueueBytes, gather: keepGather,
		log: log, wake: make(chan struct{}, 1), sinceTrim: maxBytes}
}

// keep hands p over to be written; it never waits.
func (k *keeper) keep(p store.Page) {
	if k == nil {
		return
	}
	n := int64(len(p.Body))
	k.mu.Lock()
	if k.queued+n > k.queueMax && len(k.queue) > 0 {
		k.mu.Unlock()
		k.unkept.Add(1)
		return
	}
	k.queue = append(k.queue, p)
	k.queued += n
	// The keeper needs waking when there is something to gather, and
	// when a batch is whole; not for every page between.
	wake := len(k.queue) == 1 || len(k.queue) == keepBatch
	k.mu.Unlock()
	if wake {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// run writes the pages handed over, gathered into batches, until ctx is
// done, then what is left within grace.
func (k *keeper) run(ctx context.Context, grace time.Duration) {
	if k == nil {
		return
	}
	for {
		if k.waiting() == 0 {
			select {
			case <-k.wake:
			case <-ctx.Done():
			}
		}
		if ctx.Err() == nil && k.gathered(ctx) {
			// What gathered; pages handed over during the writes wait
			// for the next batch.
			k.flush(ctx, k.waiting())
			continue
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		k.flush(fctx, k.waiting())
		cancel()
		k.mu.Lock()
		k.unkept.Add(int64(len(k.queue))) // out of time
		k.queue, k.queued = nil, 0
		k.mu.Unlock()
		return
	}
}

// waiting is how many pages wait to be written.
func (k *keeper) waiting() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.queue)
}

// gathered waits until a whole batch waits or k.gather has passed, and
// says whether ctx is still live.
func (k *keeper) gathered(ctx context.Context) bool {
	if k.gathering != nil {
		k.gathering <- k.waiting()
	}
	timer := time.NewTimer(k.gather)
	defer timer.Stop()
	for k.waiting() < keepBatch {
		select {
		case <-k.wake:
		case <-timer.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// keepWriteTimeout bounds the write of one batch of kept pages.
const keepWriteTimeout = 10 * time.Second

// writeContext is what one batch is written under. A batch taken is
// written whole: a stop between batches ends the flush, one in the middle
// of a write does not lose the batch. ctx's deadline (the stop's grace)
// still holds; without one, keepWriteTimeout.
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(keepWriteTimeout)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), dl)
}

// flush writes the first n pages of the queue, keepBatch at a time, and
// trims.
func (k *keeper) flush(ctx context.Context, n int) {
	for n > 0 && ctx.Err() == nil {
		k.mu.Lock()
		m := min(n, len(k.queue), keepBatch)
		batch := k.queue[:m:m]
		k.queue = k.queue[m:]
		var size int64
		for _, p := range batch {
			size += int64(len(p.Body))
		}
		k.queued -= size
		k.mu.Unlock()
		if m == 0 {
			return
		}
		n -= m
		wctx, cancel := writeContext(ctx)
		kept, err := k.pages.PutPages(wctx, batch)
		cancel()
		clear(batch) // the queue's array no longer holds the bodies
		if err != nil {
			k.failed("pages not kept", err, m)
			continue
		}
		k.kept.Add(int64(kept))
		k.unkept.Add(int64(m - kept)) // over store.MaxKeptPage
		if k.sinceTrim += size; k.sinceTrim >= k.maxBytes/keepTrimShare {
			k.sinceTrim = 0
			if _, err := k.pages.TrimPages(ctx, k.maxBytes); err != nil {
				k.failed("kept pages not trimmed", err, 0)
			}
		}
	}
}

// failed counts n pages not kept and says so at Warn once; the crawl
// goes on without them.
func (k *keeper) failed(msg string, err error, n int) {
	k.unkept.Add(int64(n))
	if k.warned.CompareAndSwap(false, true) {
		k.log.Warn(msg+"; a rerun with other mappings fetches them again (further failures not logged)", "error", err, "pages", n)
	}
}

// counts are the pages kept and not kept so far.
func (k *keeper) counts() (kept, unkept int64) {
	if k == nil {
		return 0, 0
	}
	return k.kept.Load(), k.unkept.Load()
}
