package store

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The outcomes collection: why a record was left incomplete, a document
// per record of its own (see the collections in mongo.go).

type mongoOutcome struct {
	ID     string       `bson:"_id"`
	Reason string       `bson:"reason"`
	Detail string       `bson:"detail,omitempty"`
	Pages  int64        `bson:"pages"`
	Failed []mongoCount `bson:"failed,omitempty"`
	Page   string       `bson:"page,omitempty"`
	Key    string       `bson:"key,omitempty"`
	Link   string       `bson:"link,omitempty"`
	Depth  int64        `bson:"link_depth,omitempty"`
}

// mongoCount is one entry of an outcome's failed counts.
type mongoCount struct {
	K string `bson:"k"`
	N int64  `bson:"n"`
}

func (m *mongoOutcome) outcome() *Outcome {
	o := &Outcome{Record: m.ID, Reason: m.Reason, Detail: m.Detail, Pages: int(m.Pages), Page: m.Page, Key: m.Key, Link: m.Link, Depth: int(m.Depth)}
	if len(m.Failed) > 0 {
		o.Failed = make(map[string]int, len(m.Failed))
		for _, c := range m.Failed {
			o.Failed[c.K] = int(c.N)
		}
	}
	return o
}

// SetOutcomes replaces or deletes each record's outcome document. A
// record the store lacks gets none: the records of the batch are looked up
// first, and records are never deleted.
func (s *mongoStore) SetOutcomes(ctx context.Context, outs []Outcome) error {
	for i, o := range outs {
		if o.Record == "" {
			return fmt.Errorf("store: set outcomes: outcome %d: empty record id", i)
		}
	}
	for len(outs) > 0 {
		n := min(len(outs), mongoBulk)
		chunk := outs[:n]
		outs = outs[n:]
		err := s.do(ctx, fmt.Sprintf("set %d outcomes", n), func(ctx context.Context) error {
			ids := make([]string, n)
			for i, o := range chunk {
				ids[i] = o.Record
			}
			exists, err := s.existingRecords(ctx, ids)
			if err != nil {
				return err
			}
			var models []mongo.WriteModel
			for _, o := range chunk {
				filter := bson.D{{Key: "_id", Value: o.Record}}
				if o.Reason == "" {
					models = append(models, mongo.NewDeleteOneModel().SetFilter(filter))
					continue
				}
				if !exists[o.Record] {
					continue
				}
				d := mongoOutcome{ID: o.Record, Reason: o.Reason, Detail: o.Detail, Pages: int64(o.Pages), Page: o.Page, Key: o.Key,
					Link: o.Link, Depth: int64(o.Depth)}
				for _, k := range sortedKeys(o.Failed) {
					d.Failed = append(d.Failed, mongoCount{k, int64(o.Failed[k])})
				}
				models = append(models, mongo.NewReplaceOneModel().SetFilter(filter).SetReplacement(d).SetUpsert(true))
			}
			if len(models) == 0 {
				return nil
			}
			_, err = s.outcomes.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
