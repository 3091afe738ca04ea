package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by cache lookups that have no entry.
var ErrNotFound = errors.New("store: not found")

// Record is one input record as the user gave it, plus what backfill found.
type Record struct {
	ID     string            // the record's id column, or its line number
	Seq    int64             // position in the input file; export keeps this order
	Fields map[string]string // the input's fields; "" means missing
	Order  []string          // the input's field names in column order
	Links  []string          // the http(s) links the crawl started from
	Found  map[string]Value  // field name → value backfill filled in
}

// Value is a filled field with its provenance.
type Value struct {
	Field     string
	Value     string
	Source    string // URL of the page the value came from
	Mapping   string
	Depth     int // link distance from the record's own links (0 = one of them)
	At        time.Time
	Conflicts []Conflict // other values pages offered for this field
	History   []Prior    // values this field held before a refresh replaced them, oldest first
}

// Prior is a value a field held until a refresh replaced it.
type Prior struct {
	Value    string
	Source   string
	Mapping  string
	Depth    int
	At       time.Time // when it was found
	Replaced time.Time // when the refresh replaced it
}

// Conflict is a value another page offered for a field and that lost.
type Conflict struct {
	Value  string
	Source string
	Depth  int
}

// Records holds the records and their filled fields.
type Records interface {
	// PutRecords upserts input records by ID, leaving Found untouched.
	PutRecords(ctx context.Context, recs []Record) error
	// SetFields upserts values on a record, replacing any earlier value of
	// the same field.
	SetFields(ctx context.Context, recordID string, vals []Value) error
	// Records calls fn for every record in Seq order, with Found filled.
	Records(ctx context.Context, fn func(Record) error) error
}

// Robots is a cached robots.txt answer for one host.
type Robots struct {
	Status    int    // HTTP status of the last fetch; 0 when unreachable
	Body      []byte // at most the parse limit
	FetchedAt time.Time
	Expires   time.Time
}

// HostCache is shared by supervisors so a host that changes owner keeps its
// history.
type HostCache interface {
	Robots(ctx context.Context, host string) (Robots, error) // ErrNotFound when absent
	PutRobots(ctx context.Context, host string, r Robots) error
	LastCrawl(ctx context.Context, host string) (time.Time, error) // ErrNotFound when absent
	PutLastCrawl(ctx context.Context, host string, at time.Time) error
}

// Store is a whole backend.
type Store interface {
	Records
	HostCache
	// Backend names the backend ("sqlite", "mongodb") for logs and tests.
	Backend() string
	Close() error
}

// Open opens the backend named by uri: a file path (or "file:" URI) for
// SQLite, created if missing. MongoDB ("mongodb://…") comes with its own
// backend.
func Open(ctx context.Context, uri string) (Store, error) {
	return openSQLite(ctx, uri)
}
