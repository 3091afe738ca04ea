package dispatcher

import (
	"maps"

	"backfill/store"
)

// settledKeep is how many of the latest settled records the feed holds
// for followers (`run --stream`, `export --follow`). A follower that falls
// further behind learns what it missed (Feed.Oldest) and gets those
// records from the store at the end of the crawl.
const settledKeep = 16384

// SettledRecord is a record that became complete, with the values found
// for it as the dispatcher holds them (the store may get them a moment
// later).
type SettledRecord struct {
	Seq   int64                  `json:"seq"` // its place in the feed, from 1
	ID    string                 `json:"id"`
	Found map[string]store.Value `json:"found,omitempty"`
}

// Feed is a slice of the settled records.
type Feed struct {
	Records []SettledRecord `json:"records"`
	// Oldest is the first Seq the feed still holds (Last+1 when empty);
	// a follower asking after an earlier one missed the records between.
	Oldest int64  `json:"oldest"`
	Last   int64  `json:"last"` // the latest Seq given out so far
	State  string `json:"state"`
}

// settledFeed is a ring of the latest settled records. Guarded by
// Dispatcher.mu.
type settledFeed struct {
	ring []SettledRecord
	last int64
}

// add appends a record that became complete.
func (f *settledFeed) add(id string, found map[string]store.Value) {
	f.last++
	r := SettledRecord{Seq: f.last, ID: id, Found: maps.Clone(found)}
	if len(f.ring) < settledKeep {
		f.ring = append(f.ring, r)
		return
	}
	f.ring[(f.last-1)%settledKeep] = r
}

// Settled returns up to limit records that became complete after Seq after,
// oldest first, as the crawl goes: what `run --stream` and `export
// --follow` write out. Safe for concurrent use with Load and Run.
func (d *Dispatcher) Settled(after int64, limit int) Feed {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := &d.settled
	feed := Feed{Last: f.last, Oldest: f.last - int64(len(f.ring)) + 1, State: d.runState}
	if feed.State == "" {
		feed.State = StateLoading
	}
	for seq := max(after+1, feed.Oldest); seq <= f.last && len(feed.Records) < limit; seq++ {
		feed.Records = append(feed.Records, f.ring[(seq-1)%settledKeep])
	}
	return feed
}
