package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The records and fields collections: the input's records, and the
// values the crawl found for them, a document per (record, field).

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
	TLSError  string          `bson:"tls_error,omitempty"`
}

// fieldID is the _id of a record's found value for field.
func fieldID(record, field string) string { return escapeKey(record) + "." + escapeKey(field) }

func toMongoValue(record string, v Value) mongoValue {
	m := mongoValue{
		ID: fieldID(record, v.Field), Record: record,
		Field: v.Field, Value: v.Value, Source: v.Source, Mapping: v.Mapping,
		Depth: int64(v.Depth), At: v.At.UTC(), Type: v.Type,
		Via: v.Via, Member: v.Member, MemberKey: v.MemberKey, TLSError: v.TLSError,
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
		Via: m.Via, Member: m.Member, MemberKey: m.MemberKey, TLSError: m.TLSError,
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
		if len(d.Raw) > mongoMaxRaw && d.Error != "" {
			// A malformed line too long for a document (records keeps
			// up to records.MaxKeptBytes): its place and reason stay.
			d.Error = fmt.Sprintf("%s; its text (%d bytes) is more than a MongoDB document holds, and is not kept", d.Error, len(d.Raw))
			d.Raw = nil
		}
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
		if v.Value == "" {
			models = append(models, mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: d.ID}}))
			continue
		}
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
