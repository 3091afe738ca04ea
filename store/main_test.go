package store_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"backfill/store/mongotest"
	"backfill/store/storetest"
)

// The embedded MongoDB-protocol server is shared by the package's tests
// (each test uses a database of its own) and started on first use, so that
// running only the SQLite tests does not start it.
var (
	mongoOnce sync.Once
	mongoSrv  *mongotest.Server
	mongoDir  string
	mongoErr  error
)

func sharedMongo(t *testing.T) *mongotest.Server {
	t.Helper()
	mongoOnce.Do(func() {
		if mongoDir, mongoErr = os.MkdirTemp("", "backfill-store-mongo-"); mongoErr != nil {
			return
		}
		mongoSrv, mongoErr = mongotest.Start(mongoDir, mongotest.Options{})
	})
	if mongoErr != nil {
		t.Fatalf("embedded mongodb: %v", mongoErr)
	}
	return mongoSrv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if mongoSrv != nil {
		if err := mongoSrv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if mongoDir != "" {
		os.RemoveAll(mongoDir)
	}
	if ran := storetest.Backends(); len(ran) > 0 {
		fmt.Printf("storetest: backends run: %s\n", strings.Join(ran, ", "))
	}
	os.Exit(code)
}
