package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// The MongoDB backend keeps nine collections in the database the URI names
// ("backfill" when it names none):
//
//	records     {_id: record id, seq, fields: [{k, v}], order: [..], links: [..],
//	             format, raw (binary), error}
//	fields      {_id: <record>.<field> (escaped), record, field, value, source,
//	             mapping, depth, at, conflicts: [..], history: [..], type}
//	outcomes    {_id: record id, reason, detail, pages, failed: [{k, n}], page, key, link, link_depth}
//	robots      {_id: host, status, body, fetched_at, expires}
//	last_crawl  {_id: <host>@<unix ms>, host, at}
//	soft404     {_id: host, print, probed_at, expires}
//	survey_rows {_id: <survey>@<key>, survey, key, at, doc} (mongo_survey.go)
//	dns         {_id: name, class, rcode, error, cname, ips, ns, ttl, at, expires} (mongo_names.go)
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
	for _, c := range []string{"meta", "records", "fields", "robots", "last_crawl", "soft404", "survey_rows", "outcomes", "dns"} {
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

// Documents. Field names are the user's (any Unicode, dots and dollars
// included), so they are values, never keys.

type mongoKV struct {
	K string `bson:"k"`
	V string `bson:"v"`
}

type mongoRecord struct {
	ID     string    `bson:"_id"`
	Seq    int64     `bson:"seq"`
	Fields []mongoKV `bson:"fields"`
	Order  []string  `bson:"order"`
	Links  []string  `bson:"links"`
	Format string    `bson:"format,omitempty"`
	Raw    []byte    `bson:"raw,omitempty"`
	Error  string    `bson:"error,omitempty"`
}

type mongoCount struct {
	K string `bson:"k"`
	N int64  `bson:"n"`
}

type mongoConflict struct {
	Value  string `bson:"value"`
	Source string `bson:"source"`
	Depth  int64  `bson:"depth"`
}

type mongoPrior struct {
	Value    string    `bson:"value"`
	Source   string    `bson:"source"`
	Mapping  string    `bson:"mapping"`
	Depth    int64     `bson:"depth"`
	At       time.Time `bson:"at"`
	Replaced time.Time `bson:"replaced"`
}

type mongoValue struct {
	ID        string          `bson:"_id"`
	Record    string          `bson:"record"`
	Field     string          `bson:"field"`
	Value     string          `bson:"value"`
	Source    string          `bson:"source"`
	Mapping   string          `bson:"mapping"`
	Depth     int64           `bson:"depth"`
	At        time.Time       `bson:"at"`
	Conflicts []mongoConflict `bson:"conflicts"`
	History   []mongoPrior    `bson:"history"`
	Type      string          `bson:"type,omitempty"`
	Via       []string        `bson:"via,omitempty"`
	Member    string          `bson:"member,omitempty"`
	MemberKey string          `bson:"member_key,omitempty"`
}

type mongoRobots struct {
	Status    int64     `bson:"status"`
	Body      []byte    `bson:"body"`
	FetchedAt time.Time `bson:"fetched_at"`
	Expires   time.Time `bson:"expires"`
}

type mongoSoft404 struct {
	Print    []byte    `bson:"print"`
	ProbedAt time.Time `bson:"probed_at"`
	Expires  time.Time `bson:"expires"`
}

type mongoLastCrawl struct {
	ID   string    `bson:"_id"`
	Host string    `bson:"host"`
	At   time.Time `bson:"at"`
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

// fieldID is the _id of a record's found value for field.
func fieldID(record, field string) string { return escapeKey(record) + "." + escapeKey(field) }

// lastCrawlDoc is the document of one crawl time of host. BSON keeps
// milliseconds, so the id does too: the same time written twice is one
// document.
func lastCrawlDoc(host string, at time.Time) mongoLastCrawl {
	at = at.UTC().Truncate(time.Millisecond)
	return mongoLastCrawl{ID: fmt.Sprintf("%s@%d", escapeKey(host), at.UnixMilli()), Host: host, At: at}
}

func toMongoValue(record string, v Value) mongoValue {
	m := mongoValue{
		ID: fieldID(record, v.Field), Record: record,
		Field: v.Field, Value: v.Value, Source: v.Source, Mapping: v.Mapping,
		Depth: int64(v.Depth), At: v.At.UTC(), Type: v.Type,
		Via: v.Via, Member: v.Member, MemberKey: v.MemberKey,
		Conflicts: make([]mongoConflict, len(v.Conflicts)),
		History:   make([]mongoPrior, len(v.History)),
	}
	for i, c := range v.Conflicts {
		m.Conflicts[i] = mongoConflict{c.Value, c.Source, int64(c.Depth)}
	}
	for i, p := range v.History {
		m.History[i] = mongoPrior{p.Value, p.Source, p.Mapping, int64(p.Depth), p.At.UTC(), p.Replaced.UTC()}
	}
	return m
}

func (m *mongoValue) value() Value {
	v := Value{
		Field: m.Field, Value: m.Value, Source: m.Source, Mapping: m.Mapping,
		Depth: int(m.Depth), At: m.At.UTC(), Type: m.Type,
		Via: m.Via, Member: m.Member, MemberKey: m.MemberKey,
	}
	if len(m.Conflicts) > 0 {
		v.Conflicts = make([]Conflict, len(m.Conflicts))
		for i, c := range m.Conflicts {
			v.Conflicts[i] = Conflict{c.Value, c.Source, int(c.Depth)}
		}
	}
	if len(m.History) > 0 {
		v.History = make([]Prior, len(m.History))
		for i, p := range m.History {
			v.History[i] = Prior{p.Value, p.Source, p.Mapping, int(p.Depth), p.At.UTC(), p.Replaced.UTC()}
		}
	}
	return v
}

func (m *mongoRecord) record() Record {
	r := Record{ID: m.ID, Seq: m.Seq, Order: m.Order, Links: m.Links,
		Fields: make(map[string]string, len(m.Fields)), Found: map[string]Value{},
		Format: m.Format, Raw: m.Raw, Error: m.Error}
	for _, kv := range m.Fields {
		r.Fields[kv.K] = kv.V
	}
	return r
}

func (s *mongoStore) PutRecords(ctx context.Context, recs []Record) error {
	// Validate and encode everything first: a bad record leaves nothing
	// written.
	docs := make([]mongoRecord, len(recs))
	for i, rec := range recs {
		if rec.ID == "" {
			return fmt.Errorf("store: put records: record %d (seq %d): empty id", i, rec.Seq)
		}
		d := mongoRecord{ID: rec.ID, Seq: rec.Seq, Fields: make([]mongoKV, 0, len(rec.Fields)), Order: rec.Order, Links: rec.Links,
			Format: rec.Format, Raw: rec.Raw, Error: rec.Error}
		for _, k := range sortedKeys(rec.Fields) {
			d.Fields = append(d.Fields, mongoKV{k, rec.Fields[k]})
		}
		if d.Order == nil {
			d.Order = []string{}
		}
		if d.Links == nil {
			d.Links = []string{}
		}
		docs[i] = d
	}
	for len(docs) > 0 {
		n := min(len(docs), mongoBulk)
		chunk := docs[:n]
		err := s.do(ctx, fmt.Sprintf("put %d records", n), func(ctx context.Context) error {
			return s.putRecordChunk(ctx, chunk)
		})
		if err != nil {
			return err
		}
		docs = docs[n:]
	}
	return nil
}

// existingRecords says which of ids the records collection has, in one
// query.
func (s *mongoStore) existingRecords(ctx context.Context, ids []string) (map[string]bool, error) {
	cur, err := s.records.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var have []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &have); err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(have))
	for _, h := range have {
		exists[h.ID] = true
	}
	return exists, nil
}

// putRecordChunk inserts the records that are new in one request and
// replaces the others. Most records of a load are new, and an insert of
// many documents is much cheaper than as many upserts. A record another
// writer inserts meanwhile fails the insert with a duplicate key, which do
// retries: the record then is one to replace.
func (s *mongoStore) putRecordChunk(ctx context.Context, docs []mongoRecord) error {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	exists, err := s.existingRecords(ctx, ids)
	if err != nil {
		return err
	}
	var fresh []any
	var models []mongo.WriteModel
	inserted := make(map[string]bool, len(docs))
	for _, d := range docs {
		// A record that exists, or comes twice in one call, is replaced
		// after the inserts, in order, so the later one wins as in a
		// sequence of upserts.
		if exists[d.ID] || inserted[d.ID] {
			models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: d.ID}}).SetReplacement(d).SetUpsert(true))
			continue
		}
		inserted[d.ID] = true
		fresh = append(fresh, d)
	}
	if len(fresh) > 0 {
		if _, err := s.records.InsertMany(ctx, fresh, options.InsertMany().SetOrdered(false)); err != nil {
			return err
		}
	}
	if len(models) > 0 {
		if _, err := s.records.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true)); err != nil {
			return err
		}
	}
	return nil
}

func (s *mongoStore) SetFields(ctx context.Context, recordID string, vals []Value) error {
	var models []mongo.WriteModel
	for i, v := range vals {
		if v.Field == "" {
			return fmt.Errorf("store: set fields on record %q: value %d: empty field name", recordID, i)
		}
		d := toMongoValue(recordID, v)
		models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: d.ID}}).SetReplacement(d).SetUpsert(true))
	}
	op := fmt.Sprintf("set fields on record %q", recordID)
	exists := false
	err := s.do(ctx, op, func(ctx context.Context) error {
		// Records are never deleted, so a record seen here is there when
		// its values are written.
		err := s.records.FindOne(ctx, bson.D{{Key: "_id", Value: recordID}},
			options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return err
		}
		exists = true
		if len(models) == 0 {
			return nil
		}
		// Ordered: a field given twice ends as the later value.
		_, err = s.fields.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
		return err
	})
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("%w: %s", ErrNotFound, op)
	}
	return nil
}

// Records reads the records in (seq, _id) order through one cursor, a batch
// at a time, and each batch's found values with one query. Memory holds one
// batch. The walk is not a snapshot: a write made meanwhile may or may not
// show, which callers accept (see the storetest case "writes during the
// walk").
func (s *mongoStore) Records(ctx context.Context, fn func(Record) error) error {
	var cur *mongo.Cursor
	err := s.do(ctx, "records", func(context.Context) error {
		var err error
		// The cursor outlives this attempt, so it is opened with the
		// caller's context, not the attempt's deadline; server selection
		// and connecting are bounded by the client's own timeouts.
		cur, err = s.records.Find(ctx, bson.D{}, options.Find().
			SetSort(bson.D{{Key: "seq", Value: 1}, {Key: "_id", Value: 1}}).
			SetBatchSize(mongoWalkBatch))
		return err
	})
	if err != nil {
		return err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	batch := make([]Record, 0, mongoWalkBatch)
	emit := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := s.attachFound(ctx, batch); err != nil {
			return err
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return err
			}
		}
		batch = batch[:0]
		return nil
	}
	for cur.Next(ctx) {
		var m mongoRecord
		if err := cur.Decode(&m); err != nil {
			return fmt.Errorf("store: records: record %v: %w", cur.Current.Lookup("_id"), err)
		}
		batch = append(batch, m.record())
		if len(batch) == mongoWalkBatch {
			if err := emit(); err != nil {
				return err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("store: records: %w", mongoErr(err))
	}
	return emit()
}

// Record reads one record and its found values.
func (s *mongoStore) Record(ctx context.Context, id string) (Record, error) {
	var m mongoRecord
	if err := s.findOne(ctx, s.records, fmt.Sprintf("record %q", id), bson.D{{Key: "_id", Value: id}}, &m); err != nil {
		return Record{}, err
	}
	batch := []Record{m.record()}
	if err := s.attachFound(ctx, batch); err != nil {
		return Record{}, err
	}
	return batch[0], nil
}

// attachFound fills the Found of a batch of records.
func (s *mongoStore) attachFound(ctx context.Context, batch []Record) error {
	ids := make([]string, len(batch))
	byID := make(map[string]*Record, len(batch))
	for i := range batch {
		ids[i] = batch[i].ID
		byID[batch[i].ID] = &batch[i]
	}
	var vals []mongoValue
	err := s.do(ctx, fmt.Sprintf("found values of %d records", len(ids)), func(ctx context.Context) error {
		vals = vals[:0]
		cur, err := s.fields.Find(ctx, bson.D{{Key: "record", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			return err
		}
		return cur.All(ctx, &vals)
	})
	if err != nil {
		return err
	}
	for i := range vals {
		if r := byID[vals[i].Record]; r != nil {
			r.Found[vals[i].Field] = vals[i].value()
		}
	}
	var outs []mongoOutcome
	err = s.do(ctx, fmt.Sprintf("outcomes of %d records", len(ids)), func(ctx context.Context) error {
		outs = outs[:0]
		cur, err := s.outcomes.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			return err
		}
		return cur.All(ctx, &outs)
	})
	if err != nil {
		return err
	}
	for i := range outs {
		if r := byID[outs[i].ID]; r != nil {
			r.Outcome = outs[i].outcome()
		}
	}
	return nil
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

func (s *mongoStore) Robots(ctx context.Context, host string) (Robots, error) {
	var m mongoRobots
	if err := s.findOne(ctx, s.robots, "robots for "+host, bson.D{{Key: "_id", Value: host}}, &m); err != nil {
		return Robots{}, err
	}
	return Robots{Status: int(m.Status), Body: m.Body, FetchedAt: m.FetchedAt.UTC(), Expires: m.Expires.UTC()}, nil
}

func (s *mongoStore) PutRobots(ctx context.Context, host string, r Robots) error {
	if host == "" {
		return errors.New("store: put robots: empty host")
	}
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	return s.replaceID(ctx, s.robots, "put robots for "+host, host, bson.D{
		{Key: "_id", Value: host},
		{Key: "status", Value: int64(r.Status)},
		{Key: "body", Value: body},
		{Key: "fetched_at", Value: r.FetchedAt.UTC()},
		{Key: "expires", Value: r.Expires.UTC()},
	})
}

func (s *mongoStore) Soft404(ctx context.Context, host string) (Soft404, error) {
	var m mongoSoft404
	if err := s.findOne(ctx, s.soft404, "soft-404 verdict for "+host, bson.D{{Key: "_id", Value: host}}, &m); err != nil {
		return Soft404{}, err
	}
	v := Soft404{Print: m.Print, ProbedAt: m.ProbedAt.UTC(), Expires: m.Expires.UTC()}
	if len(v.Print) == 0 {
		v.Print = nil
	}
	return v, nil
}

func (s *mongoStore) PutSoft404(ctx context.Context, host string, v Soft404) error {
	if host == "" {
		return errors.New("store: put soft-404 verdict: empty host")
	}
	fp := v.Print
	if fp == nil {
		fp = []byte{}
	}
	return s.replaceID(ctx, s.soft404, "put soft-404 verdict for "+host, host, bson.D{
		{Key: "_id", Value: host},
		{Key: "print", Value: fp},
		{Key: "probed_at", Value: v.ProbedAt.UTC()},
		{Key: "expires", Value: v.Expires.UTC()},
	})
}

func (s *mongoStore) LastCrawl(ctx context.Context, host string) (time.Time, error) {
	var m mongoLastCrawl
	err := s.findOne(ctx, s.lcr, "last crawl of "+host, bson.D{{Key: "host", Value: host}}, &m,
		options.FindOne().SetSort(bson.D{{Key: "at", Value: -1}}))
	if err != nil {
		return time.Time{}, err
	}
	return m.At.UTC(), nil
}

func (s *mongoStore) PutLastCrawl(ctx context.Context, host string, at time.Time) error {
	if host == "" {
		return errors.New("store: put last crawl: empty host")
	}
	return s.PutLastCrawls(ctx, map[string]time.Time{host: at})
}

// PutLastCrawls records the last-crawl times of many hosts in two bulk
// requests (the new times, then the removal of the earlier ones), each time
// kept only if it is later than the one stored, as PutLastCrawl does.
// Nothing is written if any entry is invalid.
func (s *mongoStore) PutLastCrawls(ctx context.Context, times map[string]time.Time) error {
	hosts := make([]string, 0, len(times))
	for host := range times {
		if host == "" {
			return errors.New("store: put last crawls: empty host")
		}
		hosts = append(hosts, host)
	}
	sort.Strings(hosts)
	for len(hosts) > 0 {
		n := min(len(hosts), mongoBulk)
		chunk := hosts[:n]
		var puts, prunes []mongo.WriteModel
		for _, h := range chunk {
			d := lastCrawlDoc(h, times[h])
			puts = append(puts, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: d.ID}}).SetReplacement(d).SetUpsert(true))
			prunes = append(prunes, mongo.NewDeleteManyModel().SetFilter(bson.D{
				{Key: "host", Value: h}, {Key: "at", Value: bson.D{{Key: "$lt", Value: d.At}}}}))
		}
		op := "put last crawl of " + chunk[0]
		if n > 1 {
			op = fmt.Sprintf("put last crawls of %d hosts", n)
		}
		err := s.do(ctx, op, func(ctx context.Context) error {
			if _, err := s.lcr.BulkWrite(ctx, puts, options.BulkWrite().SetOrdered(false)); err != nil {
				return err
			}
			// Only once the new time is in: until then the earlier ones
			// are the host's latest.
			_, err := s.lcr.BulkWrite(ctx, prunes, options.BulkWrite().SetOrdered(false))
			return err
		})
		if err != nil {
			return err
		}
		hosts = hosts[n:]
	}
	return nil
}
