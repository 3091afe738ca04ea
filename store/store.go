package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"backfill/records"
)

// ErrNotFound is returned by cache lookups that have no entry.
var ErrNotFound = errors.New("store: not found")

// Record is one input record as the user gave it, plus what backfill found.
type Record struct {
	ID     string            // the record's id column, or its line number
	Seq    int64             // position in the input file; export keeps this order
	Fields map[string]string // the input's fields as the crawl reads them; "" means missing
	Order  []string          // the input's field names in column order (a CSV file's header)
	Links  []string          // the http(s) links the crawl started from
	Found  map[string]Value  // field name → value backfill filled in

	// Format is the input file's, FormatCSV or FormatJSONL; "" for a
	// record stored by an earlier build, which kept no Raw.
	Format string
	// Raw is the record's text exactly as read, without its line
	// terminator: a JSON Lines line, or a CSV record (which may span
	// lines). Export writes the user's values from it, byte for byte and
	// with their JSON types; Fields is what the crawl works with. A good
	// record's Fields, Order (but a CSV header) and Links must be what
	// records.Parse reads from Raw: the SQLite backend keeps Raw alone and
	// reads them again from it.
	Raw []byte
	// Error marks a malformed input line ("file:line: reason"). Such a
	// record keeps its place (Seq) and its text (Raw, unless the line was
	// over the size limit) so that export gives it back, marked; it has
	// no Fields or Links and is never crawled for.
	Error string
	// Outcome says why a record was left incomplete: set by the
	// dispatcher at the end of a run (SetOutcomes) for the records the
	// crawl reached, nil otherwise (a run stopped before it reached the
	// record: none of its pages was asked for yet).
	Outcome *Outcome
}

// Input formats of Record.Format: the records package's.
const (
	FormatCSV   = string(records.FormatCSV)
	FormatJSONL = string(records.FormatJSONL)
)

// Outcome is why a record's missing fields stayed missing, as the
// dispatcher saw its crawl: Reason is one of a few words (the dispatcher
// names them), Detail says it for a person (the page and key of a refused
// page, the failure classes). Page and Key are set when a page's values
// were refused because a match key disagreed.
type Outcome struct {
	Record string
	Reason string
	Detail string
	Pages  int            // pages fetched for the record
	Failed map[string]int // pages that could not be fetched, by failure class
	Page   string         // the first refused page
	Key    string         // its match key that disagreed
	// Link is the link left unfollowed at the depth limit (depth-limit),
	// at Depth links from the record's own; or the start of the record's
	// only link, refused for its length (link-too-long).
	Link  string
	Depth int
}

// Value is a filled field with its provenance.
type Value struct {
	Field  string
	Value  string
	Source string // URL of the page the value came from
	// Via lists the URLs that redirected to Source, first to last (the
	// record's own link, or the link it followed, first); nil when the
	// page was reached as it is.
	Via []string
	// Member and MemberKey say which cluster member fetched Source: its
	// registered name and its public key ("" on a plaintext cluster), so
	// an operator can list, and purge, one member's answers.
	Member    string
	MemberKey string
	Mapping   string
	Depth     int // link distance from the record's own links (0 = one of them)
	At        time.Time
	Conflicts []Conflict // other values pages offered for this field
	History   []Prior    // values this field held before a refresh replaced them, oldest first
	// Type is the type the mapping field declares (etl's field types:
	// "number", "list", …; "" for a plain string). JSON Lines export
	// writes the value with it.
	Type string
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
	// SetOutcomes records why records were left incomplete, replacing
	// what was recorded before; an Outcome with an empty Reason clears
	// its record's. Outcomes of records the store lacks are ignored.
	SetOutcomes(ctx context.Context, outs []Outcome) error
	// Records calls fn for every record in Seq order, with Found and
	// Outcome filled.
	Records(ctx context.Context, fn func(Record) error) error
	// Record returns one record by ID, with Found filled; ErrNotFound
	// when there is none.
	Record(ctx context.Context, id string) (Record, error)
}

// RecordValues are values to set on one record.
type RecordValues struct {
	ID     string
	Values []Value
}

// FieldBatcher is a Records backend that sets the values of many records
// in one write (the SQLite file: one commit for all). missing names the
// records it does not have, which it left out; the rest are written.
// Callers that hold values for many records use it when the backend has
// it, and SetFields a record at a time otherwise.
type FieldBatcher interface {
	SetFieldsBatch(ctx context.Context, batch []RecordValues) (missing []string, err error)
}

// Robots is a cached robots.txt answer for one host.
type Robots struct {
	Status    int    // HTTP status of the last fetch; 0 when unreachable
	Body      []byte // at most the parse limit
	FetchedAt time.Time
	Expires   time.Time
}

// Soft404 is a host's cached soft-404 probe verdict: how it answered a
// path that does not exist. Supervisors give it the lifetime of the
// host's robots.txt entry.
type Soft404 struct {
	// Print fingerprints the host's 2xx answer, in the supervisor's own
	// encoding; empty when the host answers such paths as it should.
	Print    []byte
	ProbedAt time.Time
	Expires  time.Time
}

// HostCache is shared by supervisors so a host that changes owner, or a
// supervisor that restarts, keeps the host's history.
type HostCache interface {
	Robots(ctx context.Context, host string) (Robots, error) // ErrNotFound when absent
	PutRobots(ctx context.Context, host string, r Robots) error
	LastCrawl(ctx context.Context, host string) (time.Time, error) // ErrNotFound when absent
	PutLastCrawl(ctx context.Context, host string, at time.Time) error
	Soft404(ctx context.Context, host string) (Soft404, error) // ErrNotFound when absent
	PutSoft404(ctx context.Context, host string, v Soft404) error
}

// Store is a whole backend.
type Store interface {
	Records
	HostCache
	Surveys
	Names
	// Backend names the backend ("sqlite", "mongodb") for logs and tests.
	Backend() string
	Close() error
}

// ErrUnavailable wraps a failure that retrying did not cure in time: the
// backend could not be reached (a dropped connection, a server that does
// not answer, no primary). The write may succeed later; a caller that
// keeps what it wanted to write can try again.
var ErrUnavailable = errors.New("store: unavailable")

// Options are the settings of a store that a URI does not carry well.
// They apply to MongoDB; SQLite refuses the TLS files.
type Options struct {
	// CAFile is a PEM bundle of the certificate authorities that sign the
	// server's certificate. Setting it (or CertFile) turns TLS on.
	CAFile string
	// CertFile is a PEM client certificate for TLS client authentication,
	// with its private key in the same file unless KeyFile names another.
	CertFile string
	KeyFile  string
	// Timeout bounds one attempt of an operation, server selection and
	// connecting included. Default 10s.
	Timeout time.Duration
	// RetryFor is how long an operation that failed for want of the
	// server (dropped connection, no server selectable) is retried, with
	// back-off, before it fails with ErrUnavailable. Default 30s; a
	// negative value turns retrying off.
	RetryFor time.Duration
	// Logger gets a warning when the server cannot be reached; nil
	// discards.
	Logger *slog.Logger
}

// Open opens the backend named by uri with default Options: a file path
// (or "file:" URI) for SQLite, created if missing; "mongodb://…" or
// "mongodb+srv://…" for MongoDB.
func Open(ctx context.Context, uri string) (Store, error) {
	return OpenWith(ctx, uri, Options{})
}

// OpenWith is Open with Options.
func OpenWith(ctx context.Context, uri string, opts Options) (Store, error) {
	if strings.HasPrefix(uri, "mongodb://") || strings.HasPrefix(uri, "mongodb+srv://") {
		return openMongo(ctx, uri, opts)
	}
	if opts.CAFile != "" || opts.CertFile != "" || opts.KeyFile != "" {
		return nil, errors.New("store: open sqlite: TLS files apply to a mongodb:// store only")
	}
	return openSQLite(ctx, uri)
}
