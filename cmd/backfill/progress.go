package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"backfill/dispatcher"
)

const (
	// progressRedraw is how often the terminal's progress line is drawn
	// at most.
	progressRedraw = 200 * time.Millisecond
	// progressLogEvery is how often a crawl whose stderr is not a
	// terminal logs its progress instead.
	progressLogEvery = 30 * time.Second
	// rateWindow is the span the pages/s and the ETA are measured over:
	// recent enough to follow the crawl, long enough to be steady.
	rateWindow = 30 * time.Second
	// barCells is the width of the progress bar.
	barCells = 30
)

// rates measures pages/s and records completed per second over the last
// rateWindow of progress reports, and the ETA they give.
type rates struct {
	points []dispatcher.Progress // within rateWindow of the latest, oldest first
}

func (r *rates) add(pr dispatcher.Progress) {
	r.points = append(r.points, pr)
	i := 0
	for i < len(r.points)-1 && pr.Elapsed-r.points[i].Elapsed > rateWindow {
		i++
	}
	r.points = r.points[i:]
}

// pagesPerSec and eta over the window; ok is false when the window says
// nothing yet (under a second, or no record completed in it).
func (r *rates) measure() (pagesPerSec float64, eta time.Duration, etaOK bool) {
	if len(r.points) < 2 {
		return 0, 0, false
	}
	a, b := r.points[0], r.points[len(r.points)-1]
	dt := (b.Elapsed - a.Elapsed).Seconds()
	if dt < 1 {
		return 0, 0, false
	}
	pagesPerSec = float64(b.Pages-a.Pages) / dt
	left := b.Records - b.Complete
	if left <= 0 {
		return pagesPerSec, 0, true
	}
	if done := b.Complete - a.Complete; done > 0 {
		return pagesPerSec, time.Duration(float64(left) / (float64(done) / dt) * float64(time.Second)).Round(time.Second), true
	}
	return pagesPerSec, 0, false
}

// progressLine renders one progress line; width is the bar's cells.
func progressLine(pr dispatcher.Progress, r *rates, width int) string {
	frac := 0.0
	if pr.Records > 0 {
		frac = float64(pr.Complete) / float64(pr.Records)
	}
	filled := int(frac * float64(width))
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	rate, eta, ok := r.measure()
	etaText := etaOf(pr, eta, ok)
	return fmt.Sprintf("%s %d/%d records complete (%d partial)  %d pages  %.1f pages/s  queued %d  in flight %d  ETA %s",
		bar, pr.Complete, pr.Records, pr.Partial, pr.Pages, rate, pr.Queued, pr.InFlight, etaText)
}

// etaOf says how long the crawl will take: the dispatcher's estimate and
// the bound it comes from (dispatcher.ETA), or while nothing bounds it
// that the dispatcher knows of, what the records completed lately say
// (measured, when ok).
func etaOf(pr dispatcher.Progress, measured time.Duration, ok bool) string {
	switch {
	case pr.Complete >= pr.Records:
		return "0s"
	case pr.ETA.Seconds > 0:
		return fmt.Sprintf("%v (%v)", pr.ETA.Expected(), pr.ETA)
	case ok:
		return measured.String()
	}
	return "?"
}

// terminal owns a terminal's last line for the progress line: redrawn in
// place, and cleared before anything else is written through the
// terminal (the log), then drawn again below it, so a log line never
// prints over it. Safe for concurrent use.
type terminal struct {
	mu    sync.Mutex
	w     io.Writer
	line  string // the progress line on screen; "" when none
	last  time.Time
	rates rates
}

func newTerminal(w io.Writer) *terminal { return &terminal{w: w} }

// Write writes b (whole log lines) above the progress line.
func (t *terminal) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line != "" {
		io.WriteString(t.w, "\r\x1b[K")
	}
	n, err := t.w.Write(b)
	if t.line != "" {
		io.WriteString(t.w, t.line)
	}
	return n, err
}

// update is dispatcher.Config.Progress: it redraws the line, at most
// every progressRedraw (and always for the last report, all complete).
func (t *terminal) update(pr dispatcher.Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rates.add(pr)
	if time.Since(t.last) < progressRedraw && pr.Complete < pr.Records {
		return
	}
	t.last = time.Now()
	t.line = progressLine(pr, &t.rates, barCells)
	io.WriteString(t.w, "\r"+t.line+"\x1b[K")
}

// finish leaves the last progress line on screen and moves below it.
func (t *terminal) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line != "" {
		io.WriteString(t.w, "\n")
		t.line = ""
	}
}

// progressLog is the progress of a crawl whose stderr is not a
// terminal: a log line every progressLogEvery.
type progressLog struct {
	log   *slog.Logger
	last  time.Duration
	rates rates
}

func (p *progressLog) update(pr dispatcher.Progress) {
	p.rates.add(pr)
	if pr.Elapsed-p.last < progressLogEvery {
		return
	}
	p.last = pr.Elapsed
	rate, eta, ok := p.rates.measure()
	args := []any{"records", pr.Records, "complete", pr.Complete, "partial", pr.Partial, "pages", pr.Pages,
		"pages_per_sec", float64(int(rate*10)) / 10, "queued", pr.Queued, "in_flight", pr.InFlight, "members", pr.Members}
	if text := etaOf(pr, eta, ok); text != "?" {
		args = append(args, "eta", text)
	}
	p.log.Info("progress", args...)
}
