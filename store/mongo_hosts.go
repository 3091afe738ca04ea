package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The host caches: the robots, soft404 and last_crawl collections, a
// host's robots.txt, its soft-404 verdict and when a request to it last
// ended, shared by the supervisors of a crawl.

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

// lastCrawlDoc is the document of one crawl time of host. BSON keeps
// milliseconds, so the id does too: the same time written twice is one
// document.
func lastCrawlDoc(host string, at time.Time) mongoLastCrawl {
	at = at.UTC().Truncate(time.Millisecond)
	return mongoLastCrawl{ID: fmt.Sprintf("%s@%d", escapeKey(host), at.UnixMilli()), Host: host, At: at}
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
