package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"time"

	"backfill/dispatcher"
	"backfill/statuspage"
	"backfill/store"
)

const (
	// streamPoll is how often a follower asks for newly settled records.
	streamPoll = 250 * time.Millisecond
	// streamBatch is how many it takes at a time.
	streamBatch = 1024
)

// follower writes a crawl's records as JSON Lines, in the export's shape,
// as they settle: each record the moment the dispatcher's feed says it is
// complete (with the values the dispatcher holds, which the store may get
// a moment later), then, once the crawl has finished, every record not
// written yet: those it gave up on and those complete before it started.
// A finished stream thus holds every record once, as the export does.
type follower struct {
	st     store.Records
	w      *bufio.Writer
	lw     *store.LineWriter
	log    *slog.Logger
	after  int64    // the feed position taken so far
	seen   []uint64 // records written, a bit per store Seq
	missed int64    // feed records lost to falling behind (written by the sweep)
}

func newFollower(st store.Records, w io.Writer, provenance bool, log *slog.Logger) *follower {
	bw := bufio.NewWriter(w)
	return &follower{st: st, w: bw, lw: store.NewLineWriter(bw, store.ExportOptions{Wrap: true, Provenance: provenance}), log: log}
}

func (f *follower) written(seq int64) bool {
	i := int(seq / 64)
	return seq >= 0 && i < len(f.seen) && f.seen[i]&(1<<(seq%64)) != 0
}

func (f *follower) mark(seq int64) {
	if seq < 0 {
		return
	}
	i := int(seq / 64)
	for len(f.seen) <= i {
		f.seen = append(f.seen, 0)
	}
	f.seen[i] |= 1 << (seq % 64)
}

// take writes the records of a feed slice and reports how many.
func (f *follower) take(ctx context.Context, feed dispatcher.Feed) (int, error) {
	if feed.Oldest > f.after+1 {
		n := feed.Oldest - f.after - 1
		f.missed += n
		f.log.Warn("stream fell behind the crawl; the records it missed come at its end", "missed", n)
	}
	for _, r := range feed.Records {
		f.after = r.Seq
		rec, err := f.st.Record(ctx, r.ID)
		if errors.Is(err, store.ErrNotFound) {
			f.log.Warn("settled record not in the store; left out of the stream", "record", r.ID)
			continue
		}
		if err != nil {
			return 0, err
		}
		if f.written(rec.Seq) {
			continue // settled again (a refresh); written once
		}
		for k, v := range r.Found {
			rec.Found[k] = v
		}
		if err := f.lw.Write(rec); err != nil {
			return 0, err
		}
		f.mark(rec.Seq)
	}
	return len(feed.Records), f.w.Flush()
}

// sweep writes every record of the store not written yet.
func (f *follower) sweep(ctx context.Context) error {
	err := f.st.Records(ctx, func(rec store.Record) error {
		if f.written(rec.Seq) {
			return nil
		}
		f.mark(rec.Seq)
		return f.lw.Write(rec)
	})
	return errors.Join(err, f.w.Flush())
}

// follow feeds f from d until stop is closed, then takes what is left.
func (f *follower) follow(ctx context.Context, d *dispatcher.Dispatcher, stop <-chan struct{}) error {
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	for {
		for {
			n, err := f.take(ctx, d.Settled(f.after, streamBatch))
			if err != nil {
				return err
			}
			if n < streamBatch {
				break
			}
		}
		select {
		case <-stop:
			_, err := f.take(ctx, d.Settled(f.after, settledAll))
			return err
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// settledAll asks the feed for everything it holds.
const settledAll = 1 << 30

// streamFlag opens --stream: a file, or - for stdout.
func openStream(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "-" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--stream: %w", err)
	}
	return f, f.Close, nil
}

// followRemote feeds f from a dispatcher's status listener at base until
// the crawl finishes (then sweeps the store) or stops.
func (f *follower) followRemote(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --from %q: want the http(s) URL of a dispatcher's --status or --metrics listener", errUsage, base)
	}
	u.Path = statuspage.FeedPath
	failing := false
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	for {
		q := u.Query()
		q.Set("after", strconv.FormatInt(f.after, 10))
		u.RawQuery = q.Encode()
		var feed dispatcher.Feed
		err := getJSON(ctx, u.String(), &feed)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			failing = true
			f.log.Warn("dispatcher's feed not answering; still trying", "url", u.String(), "error", err)
		case err == nil:
			failing = false
			n, err := f.take(ctx, feed)
			if err != nil {
				return err
			}
			if n > 0 {
				continue // more may be waiting
			}
			switch feed.State {
			case dispatcher.StateFinished:
				return f.sweep(ctx)
			case dispatcher.StateStopped:
				return errors.New("the crawl stopped before it finished; follow it again once it resumes")
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
