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
	dnsresolver "backfill/resolver"
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

// Timeouts of the tests' probes and lookups. Nothing in the zone times
// out by being slow: what must time out never answers at all
// (surveytest). So most tests survey Prompt zones, where nothing waits a
// timeout out, with patient timeouts: far longer than any stall of a
// loaded machine, and free. The tests of the timeout classes themselves
// (hanging, filtered, slow names) wait each timeout out once, with the
// short ones, and run alone, so that the machine's load is all that can
// slow their answers down, not the other tests' work.
const (
	patientTimeout    = 30 * time.Second
	patientDNSTimeout = 10 * time.Second
	probeTimeout      = 4 * time.Second
	dnsTimeout        = 2 * time.Second
)

// local returns a Cluster whose Listening starts n supervisors in this
// process; they stop when the test ends. The supervisors beat every
// supervisor.DefaultHeartbeat, but the survey takes one for gone only
// after three silentHeartbeats: a test never wants that, as the gone
// supervisor's addresses would go to another while it still probes them.
func local(t testing.TB, n int, ca *surveytest.Web) survey.Cluster {
	return localUntil(context.Background(), t, n, ca)
}

// localUntil is local whose supervisors stop when ctx ends, as those of a
// one-machine survey that is interrupted.
func localUntil(parent context.Context, t testing.TB, n int, ca *surveytest.Web) survey.Cluster {
	fc := fetch.Config{UserAgent: testUA, AllowLoopback: true}
	if ca != nil {
		fc.RootCAs = ca.CA
	}
	return localFetch(parent, t, n, fc)
}

// silentHeartbeat is a third of the silence after which a test's survey
// takes a supervisor for gone.
const silentHeartbeat = 10 * time.Second

// localFetch is localUntil whose supervisors connect as fc allows.
func localFetch(parent context.Context, t testing.TB, n int, fc fetch.Config) survey.Cluster {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	return survey.Cluster{
		Expect:    n,
		Heartbeat: silentHeartbeat,
		Listening: func(endpoint string) {
			for i := range n {
				p := survey.NewProber(survey.ProberConfig{Fetch: fc})
				s, err := supervisor.New(supervisor.Config{
					Name: fmt.Sprintf("local-%d", i+1), Dispatcher: endpoint, Workers: 4, Mappings: bundled(t),
					Fetch: fc, Prober: p, HelloMax: 300 * time.Millisecond,
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

// webSpec is how the tests probe a Prompt zone.
func webSpec(w *surveytest.Web) wire.SurveySpec {
	return wire.SurveySpec{Timeout: patientTimeout, Schemes: []string{"http", "https"}, Headers: []string{"X-Powered-By"},
		MaxRedirects: 3, UserAgent: testUA, Delay: 10 * time.Millisecond, HTTPPort: w.HTTPPort, HTTPSPort: w.HTTPSPort, Per24: webPer24}
}

// webPer24 is the tests' cap on connections at once into a /24 (the
// command's default).
const webPer24 = 4

// resolver asks a Prompt zone.
func resolver(t testing.TB, w *surveytest.Web) *dnsresolver.Resolver {
	return resolverTimeout(t, w, patientDNSTimeout)
}

// resolverTimeout asks each question at most twice.
func resolverTimeout(t testing.TB, w *surveytest.Web, timeout time.Duration) *dnsresolver.Resolver {
	r, err := dnsresolver.New(dnsresolver.Config{Servers: []string{w.DNS}, Timeout: timeout, Attempts: 2, NS: true, BothFamilies: true})
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
