package store_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"backfill/proctest"
	"backfill/store"
	"backfill/store/mongotest"
	"backfill/store/storetest"
)

// quick are Options for tests: timeouts that show a failure within a
// minute, yet long enough for the embedded server, which runs under the
// race detector on a loaded 2-core machine (a batch of a few hundred
// upserts has taken over 5 s there).
var quick = store.Options{Timeout: 20 * time.Second, RetryFor: 40 * time.Second}

func openMongo(t *testing.T, uri string, opts store.Options) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.OpenWith(ctx, uri, opts)
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	if s.Backend() != "mongodb" {
		t.Fatalf("Backend() = %q, want mongodb", s.Backend())
	}
	return s
}

func TestMongoConformance(t *testing.T) {
	srv := sharedMongo(t)
	t.Logf("backend: mongodb, embedded MongoDB-protocol server at %s", srv.Addr())
	storetest.RunBackend(t, "mongodb(embedded)", func(t *testing.T) store.Store {
		return openMongo(t, srv.DatabaseURI(mongotest.DatabaseName(t)), quick)
	})
}

// TestMongoRealConformance runs the suite against the MongoDB that
// BACKFILL_TEST_MONGO_URI names, each case in a database of its own that is
// dropped afterwards.
func TestMongoRealConformance(t *testing.T) {
	base := os.Getenv(mongotest.EnvURI)
	if base == "" {
		proctest.OptIn(t, mongotest.EnvURI, "the conformance suite against a real MongoDB")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", mongotest.EnvURI, err)
	}
	t.Logf("backend: mongodb at %s", u.Redacted())
	storetest.RunBackend(t, "mongodb(real)", func(t *testing.T) store.Store {
		name := mongotest.DatabaseName(t)
		du := *u
		du.Path = "/" + name
		s := openMongo(t, du.String(), quick)
		t.Cleanup(func() { dropDatabase(t, base, name) })
		return s
	})
}

func dropDatabase(t *testing.T, uri, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Errorf("drop %s: %v", name, err)
		return
	}
	defer c.Disconnect(ctx)
	if err := c.Database(name).Drop(ctx); err != nil {
		t.Errorf("drop %s: %v", name, err)
	}
}

// TestMongoLayout checks what the backend promises about its collections:
// records and hosts are keyed by _id (unique in every collection), the
// walk's index exists, and field names with dots and dollars are stored
// escaped, never as paths.
func TestMongoLayout(t *testing.T) {
	srv := sharedMongo(t)
	name := mongotest.DatabaseName(t)
	s := openMongo(t, srv.DatabaseURI(name), quick)
	defer s.Close()
	ctx := context.Background()
	if err := s.PutRecords(ctx, []store.Record{{ID: "r1", Seq: 1, Fields: map[string]string{"a.b": "", "$c": "x"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFields(ctx, "r1", []store.Value{{Field: "a.b", Value: "dotted", At: time.Unix(1, 0)}, {Field: "%2E", Value: "percent", At: time.Unix(1, 0)}}); err != nil {
		t.Fatal(err)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	db := c.Database(name)
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"meta", "records", "fields", "robots", "last_crawl", "soft404", "dns"} {
		if !contains(names, want) {
			t.Errorf("collection %s missing; have %v", want, names)
		}
	}
	specs, err := db.Collection("records").Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var idx []string
	for _, sp := range specs {
		idx = append(idx, sp.Name)
	}
	if !contains(idx, "records_by_seq") || !contains(idx, "_id_") {
		t.Errorf("records indexes = %v, want _id_ and records_by_seq", idx)
	}
	var doc bson.M
	if err := db.Collection("fields").FindOne(ctx, bson.D{{Key: "_id", Value: "r1.a%2Eb"}}).Decode(&doc); err != nil {
		t.Errorf("the value of field a.b is not stored as r1.a%%2Eb: %v", err)
	} else if doc["field"] != "a.b" || doc["record"] != "r1" {
		t.Errorf("the value of field a.b is stored as %v", doc)
	}
	// A second store opening the same database (another process of the
	// cluster) finds everything in place.
	s2 := openMongo(t, srv.DatabaseURI(name), quick)
	defer s2.Close()
	var got []store.Record
	if err := s2.Records(ctx, func(r store.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Found["a.b"].Value != "dotted" || got[0].Found["%2E"].Value != "percent" {
		t.Errorf("second store reads %+v", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestMongoOpenErrors(t *testing.T) {
	srv := sharedMongo(t)
	newer := mongotest.DatabaseName(t)
	func() {
		ctx := context.Background()
		c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(ctx)
		if _, err := c.Database(newer).Collection("meta").InsertOne(ctx, bson.D{{Key: "_id", Value: "schema"}, {Key: "version", Value: 99}}); err != nil {
			t.Fatal(err)
		}
	}()
	// A port nothing listens on: bind one, note it, close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	noRetry := store.Options{Timeout: 300 * time.Millisecond, RetryFor: -1}

	tests := []struct {
		name   string
		uri    string
		opts   store.Options
		want   []string
		unwant string
		is     error
	}{
		{"malformed", "mongodb://user:s3cret@127.0.0.1:x/db", quick, []string{"malformed URI"}, "s3cret", nil},
		{"unreachable", "mongodb://user:s3cret@" + closed + "/db", noRetry, []string{"ping", "connection refused", closed}, "s3cret", nil},
		{"unreachable with retries", "mongodb://" + closed + "/db", store.Options{Timeout: 200 * time.Millisecond, RetryFor: 500 * time.Millisecond}, []string{"connection refused"}, "", store.ErrUnavailable},
		{"newer schema", srv.DatabaseURI(newer), quick, []string{"schema version 99 is newer"}, "", nil},
		{"missing CA file", srv.URI(), store.Options{CAFile: dir + "/nope.pem"}, []string{"CA file", "nope.pem"}, "", nil},
		{"key without cert", srv.URI(), store.Options{KeyFile: dir + "/k.pem"}, []string{"needs a client certificate"}, "", nil},
		{"TLS files on sqlite", dir + "/s.db", store.Options{CAFile: dir + "/ca.pem"}, []string{"mongodb:// store only"}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.OpenWith(context.Background(), tc.uri, tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("OpenWith(%q) succeeded", tc.uri)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tc.unwant != "" && strings.Contains(err.Error(), tc.unwant) {
				t.Errorf("error %q reveals %q", err, tc.unwant)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}
}

// TestMongoConnectionRefused: a server that refuses connections when the
// store opens is reported as such as soon as the driver meets the refusal,
// not when the attempt's (here long) timeout or the retry budget runs out:
// nothing listens where the URI points, and waiting does not cure that.
// The error names the address once, and no retry is announced. (An outage
// of a store already open is retried: TestMongoOutage.)
func TestMongoConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, retry := range []time.Duration{-1, time.Hour} {
		retried := make(chan struct{})
		var once sync.Once
		log := slog.New(notifyHandler{on: "retrying", fn: func() { once.Do(func() { close(retried) }) }})
		s, err := store.OpenWith(context.Background(), "mongodb://"+closed+"/db", store.Options{Timeout: time.Hour, RetryFor: retry, Logger: log})
		if err == nil {
			s.Close()
			t.Fatal("opened a store where nothing listens")
		}
		if !strings.Contains(err.Error(), "connection refused") || strings.Count(err.Error(), closed) != 1 {
			t.Errorf("retry %v: error %q does not say the connection was refused, naming %s once", retry, err, closed)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("retry %v: error %q is not ErrUnavailable", retry, err)
		}
		select {
		case <-retried:
			t.Errorf("retry %v: a refusal at open was retried", retry)
		default:
		}
	}
}

// TestMongoTLS connects to a server that requires TLS with client
// certificates: the right CA and client certificate get in, a missing or
// foreign client certificate does not.
func TestMongoTLS(t *testing.T) {
	srv, err := mongotest.Start(t.TempDir(), mongotest.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	uri := srv.DatabaseURI(mongotest.DatabaseName(t))
	fast := store.Options{Timeout: time.Second, RetryFor: -1}
	tests := []struct {
		name     string
		ca, cert string
		ok       bool
	}{
		{"CA and client certificate", srv.TLS.CA, srv.TLS.ClientCert, true},
		{"no client certificate", srv.TLS.CA, "", false},
		{"client certificate of another CA", srv.TLS.CA, srv.TLS.OtherCert, false},
		{"server not trusted", "", srv.TLS.ClientCert, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := fast
			opts.CAFile, opts.CertFile = tc.ca, tc.cert
			s, err := store.OpenWith(context.Background(), uri, opts)
			if !tc.ok {
				if err == nil {
					s.Close()
					t.Fatal("connected")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := s.PutLastCrawl(ctx, "tls.example", at); err != nil {
				t.Fatal(err)
			}
			if got, err := s.LastCrawl(ctx, "tls.example"); err != nil || !got.Equal(at) {
				t.Fatalf("LastCrawl = %v, %v", got, err)
			}
		})
	}
}

// TestMongoOutage stops the server under a store and starts it again: a
// write made meanwhile is retried with back-off and lands once the server
// is back; with a short retry budget it fails with ErrUnavailable.
func TestMongoOutage(t *testing.T) {
	srv, err := mongotest.Start(t.TempDir(), mongotest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	warned := make(chan struct{})
	var once sync.Once
	log := slog.New(notifyHandler{on: "mongodb not answering", fn: func() { once.Do(func() { close(warned) }) }})
	uri := srv.DatabaseURI(mongotest.DatabaseName(t))
	s := openMongo(t, uri, store.Options{Timeout: 500 * time.Millisecond, RetryFor: time.Minute, Logger: log})
	defer s.Close()
	ctx := context.Background()
	t0 := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := s.PutRecords(ctx, []store.Record{{ID: "r", Seq: 1}}); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.SetFields(ctx, "r", []store.Value{{Field: "f", Value: "during the outage", At: t0}})
	}()
	select {
	case <-warned:
	case err := <-done:
		t.Fatalf("SetFields returned %v while the server was down", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no retry was reported while the server was down")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("SetFields after the server came back: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("SetFields did not finish after the server came back")
	}
	var got []store.Record
	if err := s.Records(ctx, func(r store.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Found["f"].Value != "during the outage" {
		t.Fatalf("after the outage: %+v", got)
	}

	// A short budget gives up with a classified error.
	short := openMongo(t, uri, store.Options{Timeout: 200 * time.Millisecond, RetryFor: 600 * time.Millisecond})
	defer short.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	err = short.PutLastCrawl(ctx, "h.example", t0)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("PutLastCrawl with the server down = %v, want ErrUnavailable", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
}

// notifyHandler calls fn for every record whose message contains on.
type notifyHandler struct {
	on string
	fn func()
}

func (h notifyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h notifyHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.on) {
		h.fn()
	}
	return nil
}
func (h notifyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h notifyHandler) WithGroup(string) slog.Handler      { return h }
