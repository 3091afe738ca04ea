package store

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"backfill/resolver"
)

// mongoDNS is a document of the dns collection: a resolver.Answer by name
// (_id), with when it was had and when it expires. Like robots, the
// collection keeps one document per name: Load skips an expired one, and
// the name's next answer replaces it. (No TTL index: some servers of the
// protocol lack that index option.)
type mongoDNS struct {
	Name    string    `bson:"_id"`
	Class   string    `bson:"class,omitempty"`
	Rcode   string    `bson:"rcode,omitempty"`
	Error   string    `bson:"error,omitempty"`
	CNAMEs  []string  `bson:"cname,omitempty"`
	IPs     []string  `bson:"ips,omitempty"`
	NS      []string  `bson:"ns,omitempty"`
	TTL     int64     `bson:"ttl"`
	At      time.Time `bson:"at"`
	Expires time.Time `bson:"expires"`
}

func (s *mongoStore) dns() *mongo.Collection { return s.db.Collection("dns") }

// Names keeps the DNS cache in the dns collection.
func (s *mongoStore) Names() resolver.Store { return mongoNames{s} }

type mongoNames struct{ s *mongoStore }

func (n mongoNames) Load(ctx context.Context, name string, now time.Time) (resolver.Answer, bool, error) {
	var m mongoDNS
	err := n.s.findOne(ctx, n.s.dns(), "dns answer for "+name,
		bson.D{{Key: "_id", Value: name}, {Key: "expires", Value: bson.D{{Key: "$gt", Value: now.UTC()}}}}, &m)
	if errors.Is(err, ErrNotFound) {
		return resolver.Answer{}, false, nil
	}
	if err != nil {
		return resolver.Answer{}, false, err
	}
	return resolver.Answer{Class: m.Class, Rcode: m.Rcode, Error: m.Error, CNAMEs: m.CNAMEs, IPs: m.IPs, NS: m.NS,
		TTL: uint32(m.TTL), At: m.At.UTC()}, true, nil
}

func (n mongoNames) Save(ctx context.Context, name string, a resolver.Answer, expires time.Time) error {
	if name == "" {
		return errors.New("store: put dns answer: empty name")
	}
	doc := mongoDNS{Name: name, Class: a.Class, Rcode: a.Rcode, Error: a.Error, CNAMEs: a.CNAMEs, IPs: a.IPs, NS: a.NS,
		TTL: int64(a.TTL), At: a.At.UTC(), Expires: expires.UTC()}
	return n.s.replaceID(ctx, n.s.dns(), "put dns answer for "+name, name, doc)
}
