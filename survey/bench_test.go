package survey_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"backfill/survey"
	"backfill/survey/surveytest"
	"backfill/wire"
)

// The benchmarks run whole surveys of the loopback zone, with no delay,
// rate or per-/24 cap (they measure the machinery, not the politeness),
// and the same work done by a plain Go loop with no politeness at all as
// the ceiling. Each reports domains/s or probes/s.
//
//	go test -run XXX -bench . -benchtime 1x ./survey/

// The zone has 25 domains per address, as the .AT zone of the seed had
// (200,000 domains on 8,000 servers).
const benchDomains, benchAddrs = 5000, 200

// benchTimeout is long enough that a loaded machine does not turn plain
// answers into timeouts; on the mixed zone each hanging or filtered
// address costs it.
const benchTimeout = time.Second

// benchDNSTimeout is shorter than the zone's slow answers (SlowDNS), so
// the slow names time out as they do in a real survey.
const benchDNSTimeout = 300 * time.Millisecond

// BenchmarkWebSurvey: IP dedupe on (one probe per address) and off (every
// domain probed), with 1 and 4 supervisors, on a zone where every address
// answers (Plain) and on the mixed zone with hanging and filtered hosts,
// where a probe costs its timeout.
func BenchmarkWebSurvey(b *testing.B) {
	for _, zone := range []struct {
		name  string
		plain bool
	}{{"plain", true}, {"mixed", false}} {
		w := surveytest.Start(b, surveytest.Options{Domains: benchDomains, Addresses: benchAddrs, Plain: zone.plain, SlowDNS: 400 * time.Millisecond})
		domains := filepath.Join(b.TempDir(), "domains.txt")
		w.WriteDomains(domains)
		for _, sups := range []int{1, 4} {
			for _, every := range []bool{false, true} {
				name := fmt.Sprintf("%s/supervisors=%d/dedupe=%v", zone.name, sups, !every)
				b.Run(name, func(b *testing.B) {
					spec := wire.SurveySpec{Timeout: benchTimeout, Schemes: []string{"http"}, MaxRedirects: 3,
						UserAgent: testUA, HTTPPort: w.HTTPPort, HTTPSPort: w.HTTPSPort, EveryHost: every}
					for b.Loop() {
						_, err := survey.RunWeb(context.Background(), survey.WebConfig{
							Config:  survey.Config{StateDir: b.TempDir(), Cluster: local(b, sups, w), Spec: spec},
							Domains: domains, Resolver: resolverTimeout(b, w, benchDNSTimeout), DNSWorkers: 64,
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(benchDomains*b.N)/b.Elapsed().Seconds(), "domains/s")
				})
			}
		}
		b.Run(zone.name+"/ceiling-http.Head", func(b *testing.B) {
			for b.Loop() {
				headLoop(b, w)
			}
			b.ReportMetric(float64(benchDomains*b.N)/b.Elapsed().Seconds(), "domains/s")
		})
	}
}

// headLoop is the ceiling: every domain resolved with Go's resolver
// against the zone's server and asked HEAD / by http.Head (redirects not
// followed), 64 at once, with no dedupe, delay or per-address limit.
func headLoop(b *testing.B, w *surveytest.Web) {
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, w.DNS)
	}}
	client := &http.Client{Timeout: 3 * benchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: (&net.Dialer{Resolver: res, Timeout: benchTimeout}).DialContext}}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range work {
				resp, err := client.Head("http://" + surveytest.Domain(i) + ":" + strconv.Itoa(w.HTTPPort) + "/")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	for i := range benchDomains {
		work <- i
	}
	close(work)
	wg.Wait()
}

// BenchmarkPortSurvey: 1024 addresses × 4 ports on loopback (one port
// open on each of a few addresses, the rest refused), with 1 and 4
// supervisors, and a plain loop of net.Dialer as the ceiling.
func BenchmarkPortSurvey(b *testing.B) {
	ports := []int{surveytest.OpenPort(b, "127.5.0.1"), surveytest.OpenPort(b, "127.5.0.1"), 1, 2}
	const addrs = 1024
	probes := addrs * len(ports)
	for _, sups := range []int{1, 4} {
		b.Run(fmt.Sprintf("supervisors=%d", sups), func(b *testing.B) {
			for b.Loop() {
				_, err := survey.RunPorts(context.Background(), survey.PortsConfig{
					Config: survey.Config{StateDir: b.TempDir(), Cluster: local(b, sups, nil),
						Spec: wire.SurveySpec{Timeout: 200 * time.Millisecond, UserAgent: testUA}},
					Targets: []string{"127.5.0.0/22"}, Ports: ports, Blocklist: survey.DefaultBlocklist(), AllowLoopback: true,
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(probes*b.N)/b.Elapsed().Seconds(), "probes/s")
		})
	}
	b.Run("ceiling-net.Dialer", func(b *testing.B) {
		for b.Loop() {
			work := make(chan netip.AddrPort)
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					d := net.Dialer{Timeout: 200 * time.Millisecond}
					for ap := range work {
						if c, err := d.Dial("tcp", ap.String()); err == nil {
							c.Close()
						}
					}
				})
			}
			base := netip.MustParseAddr("127.5.0.0")
			for a, i := base, 0; i < addrs; a, i = a.Next(), i+1 {
				for _, p := range ports {
					work <- netip.AddrPortFrom(a, uint16(p))
				}
			}
			close(work)
			wg.Wait()
		}
		b.ReportMetric(float64(probes*b.N)/b.Elapsed().Seconds(), "probes/s")
	})
}
