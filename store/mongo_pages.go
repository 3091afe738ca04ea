package store

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The pages collection: the pages the crawl keeps (Pages), a document
// per page by its key (_id), its body gzipped.

type mongoPage struct {
	Key         string    `bson:"_id"`
	Host        string    `bson:"host"`
	URL         string    `bson:"url,omitempty"`
	Status      int64     `bson:"status"`
	ContentType string    `bson:"content_type"`
	Body        []byte    `bson:"body"`
	Size        int64     `bson:"size"`
	RawSize     int64     `bson:"raw_size"`
	Rendered    bool      `bson:"rendered,omitempty"`
	FetchedAt   time.Time `bson:"fetched_at"`
}

func (s *mongoStore) pages() *mongo.Collection { return s.db.Collection("pages") }

// page is the document as a Page; a body that does not unpack is an
// error IsDamaged tells, with the page's other fields.
func (m *mongoPage) page() (Page, error) {
	p := Page{Key: m.Key, URL: m.URL, Status: int(m.Status), ContentType: m.ContentType,
		Rendered: m.Rendered, FetchedAt: m.FetchedAt.UTC()}
	var err error
	p.Body, err = unpackBody(m.Key, m.Body, m.RawSize)
	return p, err
}

func (s *mongoStore) PutPages(ctx context.Context, pages []Page) (int, error) {
	var models []mongo.WriteModel
	for _, p := range pages {
		pp, ok, err := packPage(p)
		if err != nil {
			return 0, fmt.Errorf("store: put pages: %w", err)
		}
		if !ok {
			continue
		}
		d := mongoPage{Key: pp.Key, Host: pp.host, URL: pp.URL, Status: int64(pp.Status), ContentType: pp.ContentType,
			Body: pp.packed, Size: int64(len(pp.packed)), RawSize: pp.rawSize, Rendered: pp.Rendered, FetchedAt: pp.FetchedAt}
		models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: d.Key}}).SetReplacement(d).SetUpsert(true))
	}
	kept := len(models)
	for len(models) > 0 {
		// A page may be megabytes: a few at a time.
		n := min(len(models), 16)
		chunk := models[:n]
		models = models[n:]
		err := s.do(ctx, fmt.Sprintf("put %d pages", n), func(ctx context.Context) error {
			_, err := s.pages().BulkWrite(ctx, chunk, options.BulkWrite().SetOrdered(false))
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return kept, nil
}

func (s *mongoStore) Page(ctx context.Context, key string) (Page, error) {
	var m mongoPage
	if err := s.findOne(ctx, s.pages(), "page "+key, bson.D{{Key: "_id", Value: key}}, &m); err != nil {
		return Page{}, err
	}
	p, err := m.page()
	if err != nil {
		return Page{}, err
	}
	return p, nil
}

func (s *mongoStore) ListPages(ctx context.Context, after string, limit int) ([]Page, error) {
	var docs []mongoPage
	err := s.do(ctx, "list pages", func(ctx context.Context) error {
		docs = docs[:0]
		cur, err := s.pages().Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
		if err != nil {
			return err
		}
		return cur.All(ctx, &docs)
	})
	if err != nil {
		return nil, err
	}
	out := make([]Page, 0, len(docs))
	for i := range docs {
		p, err := docs[i].page()
		if err != nil {
			p.Damaged = err.Error()
		}
		out = append(out, p)
	}
	return out, nil
}

// pageSizes reads every page's key and size, newest first.
func (s *mongoStore) pageSizes(ctx context.Context) ([]mongoPage, error) {
	var docs []mongoPage
	err := s.do(ctx, "read page sizes", func(ctx context.Context) error {
		docs = docs[:0]
		cur, err := s.pages().Find(ctx, bson.D{}, options.Find().
			SetProjection(bson.D{{Key: "size", Value: 1}, {Key: "fetched_at", Value: 1}}).
			SetSort(bson.D{{Key: "fetched_at", Value: -1}, {Key: "_id", Value: -1}}))
		if err != nil {
			return err
		}
		return cur.All(ctx, &docs)
	})
	return docs, err
}

func (s *mongoStore) PageStats(ctx context.Context) (PageStats, error) {
	docs, err := s.pageSizes(ctx)
	if err != nil {
		return PageStats{}, err
	}
	st := PageStats{Pages: int64(len(docs))}
	for _, d := range docs {
		st.Bytes += d.Size
	}
	return st, nil
}

// TrimPages reads the sizes, newest first, and deletes the pages past
// the bound (several processes may trim at once: each deletes what it
// found past it, and deleting a page twice is nothing).
func (s *mongoStore) TrimPages(ctx context.Context, maxBytes int64) (int, error) {
	docs, err := s.pageSizes(ctx)
	if err != nil {
		return 0, err
	}
	var kept int64
	var drop []string
	for _, d := range docs {
		kept += d.Size
		if kept > maxBytes {
			drop = append(drop, d.Key)
		}
	}
	dropped := len(drop)
	for len(drop) > 0 {
		n := min(len(drop), mongoBulk)
		ids := drop[:n]
		drop = drop[n:]
		err := s.do(ctx, fmt.Sprintf("trim %d pages", n), func(ctx context.Context) error {
			_, err := s.pages().DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return dropped, nil
}
