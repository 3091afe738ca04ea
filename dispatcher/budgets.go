package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The budgets (filter.go) count the tasks this dispatcher process queued
// per host and per record. The counts live on disk — hosts.queued, and
// records.queued with the record's state — because a crawl of millions of
// records over hundreds of thousands of hosts cannot keep a map of either
// in memory; a bounded cache of hosts (hostCacheCap) sits in front, like
// the record cache.
//
// Budgets are per process, as they always were: each count is stored with
// the generation of the process that counted it (budgetGen, from meta,
// one more on every New) in its high bits, and a count of an earlier
// generation reads as zero. That spares a restart from resetting every
// row.
const (
	hostCacheCap = 1 << 16
	genShift     = 32
	countMask    = 1<<genShift - 1
)

// genCount packs a count with the generation that counted it.
func genCount(gen int64, n int) int64 { return gen<<genShift | int64(n)&countMask }

// countOf unpacks v: its count if it is of generation gen, else 0.
func countOf(gen, v int64) int {
	if v>>genShift != gen {
		return 0
	}
	return int(v & countMask)
}

// hostCount is one host's count in the cache.
type hostCount struct {
	host  string
	n     int
	dirty bool // changed since the last flush: in Dispatcher.dirtyHosts
}

// hostDirty notes that hc changed: flushHosts writes it, visiting the
// counts changed rather than every count cached.
func (d *Dispatcher) hostDirty(hc *hostCount) {
	if !hc.dirty {
		hc.dirty = true
		d.dirtyHosts = append(d.dirtyHosts, hc)
	}
}

// hostCount returns host's count, from the cache or the state. Callers
// hold mu and set dirty when they change it.
func (d *Dispatcher) hostCount(ctx context.Context, host string) (*hostCount, error) {
	if hc := d.hosts[host]; hc != nil {
		return hc, nil
	}
	var v int64
	err := d.st.q.hostGet.QueryRowContext(ctx, host).Scan(&v)
	if err != nil && !errors.Is(err, errNoRows) {
		return nil, fmt.Errorf("dispatcher: state host %s: %w", host, err)
	}
	hc := &hostCount{host: host, n: countOf(d.gen, v)}
	d.hosts[host] = hc
	return hc, nil
}

// flushHosts writes the changed host counts (in host order, which is the
// table's) and empties the cache once it outgrew hostCacheCap: every entry
// is clean by then, so nothing is lost.
func (d *Dispatcher) flushHosts(ctx context.Context) error {
	dirty := d.dirtyHosts
	slices.SortFunc(dirty, func(a, b *hostCount) int { return strings.Compare(a.host, b.host) })
	for _, size := range chunkSizes(len(dirty), rowChunk) {
		part := dirty[:size]
		dirty = dirty[size:]
		st, err := d.st.stmtN(ctx, "hostPut", size, func(n int) string {
			return `INSERT INTO hosts(host, queued) VALUES ` + placeholders(n, "(?, ?)") +
				` ON CONFLICT(host) DO UPDATE SET queued = excluded.queued`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 2*size)
		for _, hc := range part {
			args = append(args, hc.host, genCount(d.gen, hc.n))
			hc.dirty = false
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state hosts: %w", err)
		}
	}
	clear(d.dirtyHosts)
	d.dirtyHosts = d.dirtyHosts[:0]
	if len(d.hosts) > hostCacheCap {
		clear(d.hosts)
	}
	return nil
}
