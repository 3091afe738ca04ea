package survey

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"backfill/seconds"
	"backfill/store"
	"backfill/wire"
)

// Config is what both surveys share.
type Config struct {
	StateDir string      // survey.db: the runs, tasks, rows and DNS cache (resumable)
	Store    store.Store // the results store the rows also go to; nil: none
	// StoreDrain is how long the end of a run waits for the rows still
	// to reach the store; what has not stays in the state and goes on the
	// next start. Default 30s.
	StoreDrain time.Duration

	Out    io.Writer // rows as they are committed; nil: none
	Format string    // FormatJSONL (default) or FormatCSV

	Cluster Cluster
	// Spec is how every supervisor probes. Spec.Rate is the survey's
	// total; each supervisor gets its share.
	Spec wire.SurveySpec

	Logger *slog.Logger
	Now    func() time.Time // default time.Now
}

func (c Config) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// DefaultStoreDrain bounds the wait for the results store at the end.
const DefaultStoreDrain = 30 * time.Second

// storeBatch is how many rows go to the results store at once.
const storeBatch = 500

// run opens the state, resumes or starts the run of job, plans it
// (plan) unless it was planned before being interrupted, writes the rows
// it already has, dispatches the tasks left, and summarizes.
func (c Config) run(ctx context.Context, job, params string, plan func(context.Context, *state, run, *run) error,
	rows func(*task, *wire.SurveyResult) []row) (*Summary, error) {
	started := time.Now()
	if c.StateDir == "" {
		return nil, errors.New("survey: no state directory")
	}
	out, err := newOutput(c.Out, c.Format, job)
	if err != nil {
		return nil, err
	}
	st, err := openState(ctx, c.StateDir)
	if err != nil {
		return nil, err
	}
	defer st.close()
	cur, prev, err := st.openRun(ctx, job, params, c.now())
	if err != nil {
		return nil, err
	}
	resumed := cur.planned
	if !cur.planned {
		if err := plan(ctx, st, cur, prev); err != nil {
			return nil, err
		}
	} else {
		c.log().Info("resuming survey run", "run", cur.name())
	}
	// The rows the run has so far come first, so the output is whole
	// after a resume too.
	var have []row
	if err := st.rows(ctx, cur, func(w row) error { have = append(have, w); return nil }); err != nil {
		return nil, err
	}
	if err := out.write(have); err != nil {
		return nil, err
	}
	tasks, err := st.todo(ctx, cur)
	if err != nil {
		return nil, err
	}

	sctx, stopStorer := context.WithCancel(ctx)
	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	if c.Store != nil {
		wg.Go(func() { c.storeLoop(sctx, st, cur, kick) })
	}
	var dstats dispatchStats
	var runErr error
	if len(tasks) > 0 {
		d, err := newDispatch(c.Cluster, c.log(), job, c.Spec)
		if err != nil {
			stopStorer()
			wg.Wait()
			return nil, err
		}
		d.rows = rows
		d.commit = func(ctx context.Context, rows []row, done []string) error {
			if err := st.commit(ctx, cur, rows, done); err != nil {
				return err
			}
			select {
			case kick <- struct{}{}:
			default:
			}
			return out.write(rows)
		}
		runErr = d.run(ctx, tasks)
		dstats = d.stats
	}
	stopStorer()
	wg.Wait()
	if runErr == nil {
		runErr = st.finish(ctx, cur, c.now())
	}
	pending := 0
	if c.Store != nil {
		pending = c.drainStore(context.WithoutCancel(ctx), st, cur)
	}
	sum, err := summarize(context.WithoutCancel(ctx), st, cur)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	sum.Resumed, sum.StorePending, sum.Dispatch = resumed, pending, dstats
	sum.Elapsed = seconds.Of(time.Since(started).Round(time.Millisecond))
	if runErr == nil {
		sum.Finished = true
	}
	return sum, runErr
}

// storeLoop copies committed rows to the results store as they come.
func (c Config) storeLoop(ctx context.Context, st *state, cur run, kick <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick.C:
		}
		_, err := c.storeSome(ctx, st, cur)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			c.log().Warn("survey rows not reaching the results store; they wait in the state", "error", err)
		case err == nil && failing:
			failing = false
			c.log().Info("survey rows reach the results store again")
		}
	}
}

// storeSome sends one batch of unstored rows; it reports how many went.
func (c Config) storeSome(ctx context.Context, st *state, cur run) (int, error) {
	rows, err := st.unstored(ctx, cur, storeBatch)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	batch := make([]store.SurveyRow, len(rows))
	for i, w := range rows {
		batch[i] = store.SurveyRow{Survey: cur.name(), Key: w.key, At: w.at, Doc: w.doc}
	}
	if err := c.Store.PutSurveyRows(ctx, batch); err != nil {
		return 0, err
	}
	return len(rows), st.markStored(ctx, cur, rows)
}

// drainStore sends what is left, for at most StoreDrain, and returns how
// many rows are still not in the store.
func (c Config) drainStore(ctx context.Context, st *state, cur run) int {
	limit := c.StoreDrain
	if limit <= 0 {
		limit = DefaultStoreDrain
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := c.storeSome(ctx, st, cur)
		if err != nil {
			c.log().Warn("survey rows left in the state for the next start", "error", err)
			break
		}
		if n == 0 {
			break
		}
	}
	left, err := st.unstored(context.WithoutCancel(ctx), cur, 1<<30)
	if err != nil {
		return -1
	}
	return len(left)
}
