package store

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// survey_rows documents: {_id: <survey>@<key> (escaped), survey, key, at,
// doc}. doc is the row's JSON as a string, so it comes back byte for byte.

type mongoSurveyRow struct {
	ID     string    `bson:"_id"`
	Survey string    `bson:"survey"`
	Key    string    `bson:"key"`
	At     time.Time `bson:"at"`
	Doc    string    `bson:"doc"`
}

func (s *mongoStore) surveyRows() *mongo.Collection { return s.db.Collection("survey_rows") }

func (s *mongoStore) PutSurveyRows(ctx context.Context, rows []SurveyRow) error {
	if err := checkSurveyRows(rows); err != nil {
		return err
	}
	for len(rows) > 0 {
		n := min(len(rows), mongoBulk)
		models := make([]mongo.WriteModel, n)
		for i, r := range rows[:n] {
			id := escapeKey(r.Survey) + "@" + escapeKey(r.Key)
			doc := mongoSurveyRow{ID: id, Survey: r.Survey, Key: r.Key, At: r.At.UTC(), Doc: string(r.Doc)}
			models[i] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: id}}).SetReplacement(doc).SetUpsert(true)
		}
		err := s.do(ctx, fmt.Sprintf("put %d survey rows", n), func(ctx context.Context) error {
			_, err := s.surveyRows().BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
			return err
		})
		if err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func (s *mongoStore) SurveyRows(ctx context.Context, survey string, fn func(SurveyRow) error) error {
	// Read in batches by key, so a long walk holds no cursor open while fn
	// works, and a retry repeats one batch only.
	after := ""
	for {
		var batch []mongoSurveyRow
		err := s.do(ctx, "survey rows of "+survey, func(ctx context.Context) error {
			filter := bson.D{{Key: "survey", Value: survey}, {Key: "key", Value: bson.D{{Key: "$gt", Value: after}}}}
			cur, err := s.surveyRows().Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "key", Value: 1}}).SetLimit(mongoWalkBatch))
			if err != nil {
				return err
			}
			batch = batch[:0]
			return cur.All(ctx, &batch)
		})
		if err != nil {
			return err
		}
		for _, m := range batch {
			if err := fn(SurveyRow{Survey: m.Survey, Key: m.Key, At: m.At.UTC(), Doc: []byte(m.Doc)}); err != nil {
				return err
			}
		}
		if len(batch) < mongoWalkBatch {
			return nil
		}
		after = batch[len(batch)-1].Key
	}
}
