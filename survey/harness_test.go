package survey_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"backfill/etl"
	"backfill/fetch"
	"backfill/mappings"
	"backfill/supervisor"
	"backfill/survey"
	"backfill/survey/surveytest"
	"backfill/wire"
)

// The tests run surveys the way the command does: the survey's dispatcher
// and real supervisors (package supervisor, with this package's Prober)
// over ZeroMQ on loopback, against surveytest's zone.

const testUA = "backfill-survey-test (+https://backfill.invalid/survey)"

var (
	setOnce sync.Once
	set     *etl.Set
)

func bundled(t testing.TB) *etl.Set {
	setOnce.Do(func() {
		s, err := etl.LoadFS(mappings.FS, ".")
		if err != nil {
			panic(err)
		}
		set = s
	})
	return set
}

// local returns a Cluster whose Listening starts n supervisors in this
// process; they stop when the test ends.
func local(t testing.TB, n int, ca *surveytest.Web) survey.Cluster {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	return survey.Cluster{
		Expect:    n,
		Heartbeat: 200 * time.Millisecond,
		Listening: func(endpoint string) {
			for i := range n {
				fc := fetch.Config{UserAgent: testUA, AllowLoopback: true}
				if ca != nil {
					fc.RootCAs = ca.CA
				}
				p := survey.NewProber(survey.ProberConfig{Fetch: fc})
				s, err := supervisor.New(supervisor.Config{
					Name: fmt.Sprintf("local-%d", i+1), Dispatcher: endpoint, Workers: 4, Mappings: bundled(t),
					Fetch: fc, Prober: p, Heartbeat: 200 * time.Millisecond, HelloMax: 300 * time.Millisecond,
					Logger: slog.New(slog.DiscardHandler),
				})
				if err != nil {
					t.Errorf("supervisor: %v", err)
					return
				}
				wg.Go(func() {
					defer p.Close()
					s.Run(ctx)
				})
			}
		},
	}
}

// webSpec is how the tests probe the zone. The delay between two
// connections to an address gives its server the time to see the first
// one closed, so its count of connections open at once is exact.
func webSpec(w *surveytest.Web) wire.SurveySpec {
	return wire.SurveySpec{Timeout: 400 * time.Millisecond, Schemes: []string{"http", "https"}, Headers: []string{"X-Powered-By"},
		MaxRedirects: 3, UserAgent: testUA, Delay: 50 * time.Millisecond, HTTPPort: w.HTTPPort, HTTPSPort: w.HTTPSPort, Per24: 2}
}

func resolver(t testing.TB, w *surveytest.Web) *survey.Resolver {
	r, err := survey.NewResolver(w.DNS, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readRows parses JSON Lines output.
func readRows[T any](t testing.TB, b []byte) []T {
	t.Helper()
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func writeFile(t testing.TB, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
