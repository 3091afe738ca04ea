package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// The MongoDB backend keeps ten collections in the database the URI names
// ("backfill" when it names none):
//
//	records     {_id: record id, seq, fields: [{k, v}], order: [..], links: [..],
//	             format, raw (binary), error} (mongo_records.go)
//	fields      {_id: <record>.<field> (escaped), record, field, value, source,
//	             mapping, depth, at, conflicts: [..], history: [..], type}
//	             (mongo_records.go)
//	outcomes    {_id: record id, reason, detail, pages, failed: [{k, n}], page, key, link, link_depth}
//	             (mongo_outcomes.go)
//	robots      {_id: host, status, body, fetched_at, expires} (mongo_hosts.go)
//	last_crawl  {_id: <host>@<unix ms>, host, at} (mongo_hosts.go)
//	soft404     {_id: host, print, probed_at, expires} (mongo_hosts.go)
//	survey_rows {_id: <survey>@<key>, survey, key, at, doc} (mongo_survey.go)
//	dns         {_id: name, class, rcode, error, cname, ips, ns, ttl, at, expires} (mongo_names.go)
//	pages       {_id: page key, host, url, status, content_type, body (gzip), size, raw_size,
//	             rendered, fetched_at} (mongo_pages.go)
//	meta        {_id: "schema", version}
//
// Every write is a whole-document insert or replace keyed by _id, or a
// delete, never a partial update of a document another writer may be
// changing. MongoDB updates a document atomically, but not every server
// speaking its protocol does (some read, modify and write back the whole
// document, losing a concurrent change), and the store must be right on
// either. So:
//
//   - a record's found values are documents of their own, one per field,
//     so writers setting different fields of one record never touch the
//     same document; so is its outcome;
//   - last_crawl is insert-only: a time is a document keyed by host and
//     time, LastCrawl reads the latest, and a write removes the host's
//     earlier ones. The latest is never removed (only a later write removes
//     anything, and only what is earlier than itself), so the later time
//     wins whatever the interleaving, and a host keeps about one document.
//
// Record ids, (record, field) pairs and hosts are _id values, which
// MongoDB indexes uniquely in every collection: upserts are idempotent and
// two processes can never create one record or host twice. SetFields checks
// that the record exists and never creates one. Nothing uses transactions,
// which a single server and some MongoDB-protocol servers lack.
const (
	mongoDefaultDB      = "backfill"
	mongoSchemaVersion  = 1
	mongoDefaultTimeout = 10 * time.Second
	mongoDefaultRetry   = 30 * time.Second
	// mongoMaxRaw bounds a malformed line's text kept in its document
	// (MongoDB's are at most 16 MiB).
	mongoMaxRaw = 15 << 20
	// mongoBulk bounds the documents sent in one request.
	mongoBulk = 250
	// mongoWalkBatch is how many records a Records walk fetches, and
	// looks the found values up for, at a time.
	mongoWalkBatch = 250
)

type mongoStore struct {
	client            *mongo.Client
	db                *mongo.Database
	records, fields   *mongo.Collection
	robots, lcr       *mongo.Collection
	soft404           *mongo.Collection
	outcomes          *mongo.Collection
	timeout, retryFor time.Duration
	log               *slog.Logger
	where             string // the URI without credentials, for messages
	hosts             []string
	health            *mongoHealth
	// opening is true while openMongo sets the store up: a refused
	// connection then means nothing listens where the URI points (a server
	// not started, a wrong host or port), which waiting does not cure, so
	// it fails at once. Once open, a refusal is an outage and is retried.
	opening bool

	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*mongoStore)(nil)

// openMongo connects, checks the server answers (retrying as any operation
// does) and creates the collections and indexes the store needs.
func openMongo(ctx context.Context, uri string, opts Options) (Store, error) {
	where := redactURI(uri)
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		// The driver's message may quote the URI, password included.
		return nil, fmt.Errorf("store: open mongodb %s: malformed URI", where)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = mongoDefaultTimeout
	}
	retryFor := opts.RetryFor
	switch {
	case retryFor == 0:
		retryFor = mongoDefaultRetry
	case retryFor < 0:
		retryFor = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	health := &mongoHealth{waiters: make(map[int]func(error))}
	co := options.Client().ApplyURI(uri).
		SetAppName("backfill").
		SetServerSelectionTimeout(timeout).
		SetConnectTimeout(timeout).
		SetServerMonitor(&event.ServerMonitor{ServerHeartbeatFailed: health.failed})
	if opts.CAFile != "" || opts.CertFile != "" || opts.KeyFile != "" {
		tc, err := mongoTLS(opts)
		if err != nil {
			return nil, fmt.Errorf("store: open mongodb %s: %w", where, err)
		}
		co.SetTLSConfig(tc)
	}
	client, err := mongo.Connect(co)
	if err != nil {
		return nil, fmt.Errorf("store: open mongodb %s: %w", where, err)
	}
	name := cs.Database
	if name == "" {
		name = mongoDefaultDB
	}
	db := client.Database(name)
	s := &mongoStore{
		client:   client,
		db:       db,
		records:  db.Collection("records"),
		fields:   db.Collection("fields"),
		robots:   db.Collection("robots"),
		lcr:      db.Collection("last_crawl"),
		soft404:  db.Collection("soft404"),
		outcomes: db.Collection("outcomes"),
		timeout:  timeout,
		retryFor: retryFor,
		log:      log.With("store", where),
		where:    where,
		hosts:    cs.Hosts,
		health:   health,
		opening:  true,
	}
	err = s.setup(ctx)
	s.opening = false
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		client.Disconnect(dctx)
		return nil, fmt.Errorf("store: open mongodb %s: %w", where, err)
	}
	return s, nil
}

// setup checks the schema version and creates what is missing. Every step
// may run in several processes at once: creating an existing collection or
// index is not an error.
func (s *mongoStore) setup(ctx context.Context) error {
	if err := s.do(ctx, "ping", func(ctx context.Context) error {
		return s.client.Ping(ctx, nil)
	}); err != nil {
		return err
	}
	meta := s.db.Collection("meta")
	var v struct {
		Version int `bson:"version"`
	}
	err := s.do(ctx, "read schema version", func(ctx context.Context) error {
		err := meta.FindOne(ctx, bson.D{{Key: "_id", Value: "schema"}}).Decode(&v)
		if errors.Is(err, mongo.ErrNoDocuments) {
			v.Version = 0
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if v.Version > mongoSchemaVersion {
		return fmt.Errorf("schema version %d is newer than this build's %d", v.Version, mongoSchemaVersion)
	}
	for _, c := range []string{"meta", "records", "fields", "robots", "last_crawl", "soft404", "survey_rows", "outcomes", "dns", "pages"} {
		err := s.do(ctx, "create collection "+c, func(ctx context.Context) error {
			err := s.db.CreateCollection(ctx, c)
			if se := mongo.ServerError(nil); errors.As(err, &se) && se.HasErrorCode(48) { // NamespaceExists
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	// Records walks in (seq, _id) order and looks the found values up by
	// record; LastCrawl reads a host's latest time. The indexes spare the
	// server a scan of the collection each time.
	indexes := []struct {
		c    *mongo.Collection
		name string
		keys bson.D
	}{
		{s.records, "records_by_seq", bson.D{{Key: "seq", Value: 1}, {Key: "_id", Value: 1}}},
		{s.fields, "fields_by_record", bson.D{{Key: "record", Value: 1}}},
		{s.lcr, "last_crawl_by_host", bson.D{{Key: "host", Value: 1}, {Key: "at", Value: -1}}},
		{s.surveyRows(), "survey_rows_by_key", bson.D{{Key: "survey", Value: 1}, {Key: "key", Value: 1}}},
		{s.pages(), "pages_by_age", bson.D{{Key: "fetched_at", Value: -1}, {Key: "_id", Value: -1}}},
	}
	for _, ix := range indexes {
		err := s.do(ctx, "create index "+ix.name, func(ctx context.Context) error {
			_, err := ix.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name)})
			return err
		})
		if err != nil {
			return err
		}
	}
	return s.do(ctx, "write schema version", func(ctx context.Context) error {
		_, err := meta.UpdateOne(ctx, bson.D{{Key: "_id", Value: "schema"}},
			bson.D{{Key: "$max", Value: bson.D{{Key: "version", Value: mongoSchemaVersion}}}},
			options.UpdateOne().SetUpsert(true))
		return err
	})
}

// redactURI is uri with its password (and any query, which may carry TLS
// key passwords) left out, fit for messages and logs.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		scheme, _, _ := strings.Cut(uri, "://")
		return scheme + "://…"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	u.RawQuery = ""
	return u.String()
}

func (s *mongoStore) Backend() string { return "mongodb" }

func (s *mongoStore) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		if err := s.client.Disconnect(ctx); err != nil {
			s.closeErr = fmt.Errorf("store: close mongodb %s: %w", s.where, err)
		}
	})
	return s.closeErr
}

// escapeKey percent-encodes '%', '.', '$' and NUL, so that joining escaped
// parts with '.' (or '@') is unambiguous and yields no operator or path.
func escapeKey(s string) string {
	if !strings.ContainsAny(s, "%.$@\x00") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '.', '$', '@', 0:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// findOne decodes into dst the first document of c that filter finds
// (opts may sort), retried as do retries; ErrNotFound, naming what, when
// there is none.
func (s *mongoStore) findOne(ctx context.Context, c *mongo.Collection, what string, filter bson.D, dst any,
	opts ...options.Lister[options.FindOneOptions]) error {
	found := true
	err := s.do(ctx, what, func(ctx context.Context) error {
		err := c.FindOne(ctx, filter, opts...).Decode(dst)
		if errors.Is(err, mongo.ErrNoDocuments) {
			found = false
			return nil
		}
		return err
	})
	if err == nil && !found {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}

// replaceID writes doc, whole, as the document of c with _id id, creating
// it if absent.
func (s *mongoStore) replaceID(ctx context.Context, c *mongo.Collection, what, id string, doc any) error {
	return s.do(ctx, what, func(ctx context.Context) error {
		_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, doc, options.Replace().SetUpsert(true))
		return err
	})
}
