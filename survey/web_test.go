package survey_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/fetch"
	dnsresolver "backfill/resolver"
	"backfill/survey"
	"backfill/survey/surveytest"
	"backfill/wire"
)

// checkRow compares a row with what the zone says domain i is.
func checkRow(t *testing.T, w *surveytest.Web, i int, r survey.WebRow) {
	t.Helper()
	switch w.Class(i) {
	case surveytest.NameNX:
		want(t, r, survey.Unresolved, dnsresolver.ClassNXDomain)
		return
	case surveytest.NameServFail:
		want(t, r, survey.Unresolved, dnsresolver.ClassServFail)
		return
	case surveytest.NameSlow:
		want(t, r, survey.Unresolved, dnsresolver.ClassTimeout)
		return
	case surveytest.NameCNAME:
		if !slices.Equal(r.DNS.CNAMEs, []string{fmt.Sprintf("h%05d.hosting.test", i)}) {
			t.Errorf("%s: CNAME chain %v", r.Domain, r.DNS.CNAMEs)
		}
	}
	ip := w.Addr(i)
	if r.IP != ip.String() || !slices.Equal(r.DNS.IPs, []string{ip.String()}) || !slices.Equal(r.DNS.NS, w.NS(i)) {
		t.Errorf("%s: ip %s dns %+v, want %s and NS %v", r.Domain, r.IP, r.DNS, ip, w.NS(i))
	}
	kind := w.Kind(ip)
	switch kind {
	case surveytest.KindHang:
		want(t, r, survey.Unresponsive, survey.WebTimeout)
		return
	case surveytest.KindClosed:
		want(t, r, survey.Unresponsive, survey.WebRefused)
		return
	case surveytest.KindFiltered:
		want(t, r, survey.Unresponsive, survey.WebConnectTimeout)
		return
	}
	want(t, r, survey.Answered, "")
	if len(r.Probes) != 2 {
		t.Fatalf("%s: %d probes, want http and https", r.Domain, len(r.Probes))
	}
	h, s := r.Probes[0], r.Probes[1]
	if h.Scheme != "http" || s.Scheme != "https" || h.Server != w.Server(ip) || s.Server != w.Server(ip) || h.Headers["X-Powered-By"] != "test/"+kind {
		t.Errorf("%s (%s): probes %+v", r.Domain, kind, r.Probes)
	}
	if s.TLSVersion != "TLS 1.3" || !strings.Contains(s.CertIssuer, "backfill test CA") && kind != surveytest.KindSelfSign || s.CertExpiry.IsZero() {
		t.Errorf("%s (%s): TLS %q issuer %q expiry %v", r.Domain, kind, s.TLSVersion, s.CertIssuer, s.CertExpiry)
	}
	if (s.CertError != "") != (kind == surveytest.KindSelfSign) {
		t.Errorf("%s (%s): cert error %q", r.Domain, kind, s.CertError)
	}
	probed := r.Domain
	if r.SharedIP {
		probed = r.ProbedAs
	}
	switch kind {
	case surveytest.KindNoHead:
		if h.Method != "GET" || h.Status != 206 {
			t.Errorf("%s: HEAD refused, want a ranged GET: %+v", r.Domain, h)
		}
	case surveytest.KindToHTTPS:
		to := fmt.Sprintf("https://%s:%d/", probed, w.HTTPSPort)
		if !slices.Equal(h.Redirects, []string{to}) || h.FinalURL != to || h.Status != 200 {
			t.Errorf("%s: redirect to https: %+v", r.Domain, h)
		}
	case surveytest.KindElsewhere:
		if h.Status != 302 || h.FinalURL != "https://www.elsewhere.example/landing" {
			t.Errorf("%s: redirect elsewhere: %+v", r.Domain, h)
		}
	default:
		if h.Method != "HEAD" || h.Status != 200 || h.FinalURL != fmt.Sprintf("http://%s:%d/", probed, w.HTTPPort) {
			t.Errorf("%s: %+v", r.Domain, h)
		}
	}
}

func want(t *testing.T, r survey.WebRow, outcome, class string) {
	t.Helper()
	if r.Outcome != outcome || r.Class != class {
		t.Errorf("%s: %s/%s, want %s/%s (%+v)", r.Domain, r.Outcome, r.Class, outcome, class, r)
	}
}

// checkAsked checks how a survey with IP dedupe and webSpec's politeness
// asked the zone: expectedHits requests at every address, one connection
// at a time to each, at most webPer24 at once into each /24.
func checkAsked(t *testing.T, w *surveytest.Web) {
	t.Helper()
	for _, a := range w.Addresses() {
		if got, wantN := w.Hits(a), expectedHits[w.Kind(a)]; got != wantN {
			t.Errorf("%s (%s) got %d requests, want %d", a, w.Kind(a), got, wantN)
		}
		if w.MaxConns(a) > 1 {
			t.Errorf("%s had %d connections at once", a, w.MaxConns(a))
		}
		if w.MaxBlockConns(a) > webPer24 {
			t.Errorf("the /24 of %s had %d connections at once, want at most %d", a, w.MaxBlockConns(a), webPer24)
		}
	}
}

// expectedHits is how many requests a survey with IP dedupe makes to an
// address of kind: one per scheme, plus the GET after a refused HEAD and
// the redirect followed on the same host.
var expectedHits = map[string]int{
	surveytest.KindNormal: 2, surveytest.KindSelfSign: 2, surveytest.KindElsewhere: 2, surveytest.KindHang: 2,
	surveytest.KindNoHead: 4, surveytest.KindToHTTPS: 3, surveytest.KindClosed: 0, surveytest.KindFiltered: 0,
}

// A survey of a Prompt zone: everything but the timeout classes
// (TestWebTimeouts).
func TestWebSurvey(t *testing.T) {
	t.Parallel()
	const domains = 600
	w := surveytest.Start(t, surveytest.Options{Domains: domains, Addresses: 60, Prompt: true})
	dir := t.TempDir()
	list := filepath.Join(dir, "domains.txt")
	if err := w.WriteDomains(list, "not a domain!", "d00001.test", "  # indented comment", "http://D00002.TEST/path"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := survey.RunWeb(context.Background(), survey.WebConfig{
		Config:  survey.Config{StateDir: filepath.Join(dir, "state"), Out: &out, Cluster: local(t, 2, w), Spec: webSpec(w)},
		Domains: list, Resolver: resolver(t, w),
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows[survey.WebRow](t, out.Bytes())
	if len(rows) != domains || sum.Rows != domains || !sum.Finished {
		t.Fatalf("%d rows, summary %d finished %v; want %d", len(rows), sum.Rows, sum.Finished, domains)
	}
	if sum.Input.Bad != 1 || sum.Input.Dups != 2 || !strings.Contains(sum.Input.Errors[0], "domains.txt:2: ") {
		t.Errorf("input report %+v", sum.Input)
	}
	probedAs := map[string]string{} // address → the domain probed there
	outcomes := map[string]int{}
	for _, r := range rows {
		var i int
		fmt.Sscanf(r.Domain, "d%05d.test", &i)
		checkRow(t, w, i, r)
		outcomes[r.Outcome]++
		if r.IP == "" {
			continue
		}
		if !r.SharedIP {
			if prev, dup := probedAs[r.IP]; dup {
				t.Errorf("%s probed for %s and %s", r.IP, prev, r.Domain)
			}
			probedAs[r.IP] = r.Domain
		}
	}
	for _, r := range rows {
		if r.SharedIP && probedAs[r.IP] != r.ProbedAs {
			t.Errorf("%s shares %s's probe, but %s was probed at %s", r.Domain, r.ProbedAs, probedAs[r.IP], r.IP)
		}
	}
	checkAsked(t, w)
	for k, n := range outcomes {
		if sum.Outcomes[k] != n {
			t.Errorf("summary outcomes %v, rows %v", sum.Outcomes, outcomes)
		}
	}
	if sum.SharedIP == 0 || sum.Probes != 2*sum.Addresses || sum.CrossDomain == 0 || sum.HTTPS.HTTPS == 0 || len(sum.Servers) == 0 || len(sum.TopNS) == 0 {
		t.Errorf("summary %+v (hits %d)", sum, w.TotalHits())
	}
	// The run report reads the same summary back from the state.
	latest, err := survey.Latest(context.Background(), filepath.Join(dir, "state"))
	if err != nil || len(latest) != 1 {
		t.Fatalf("Latest: %d summaries, %v", len(latest), err)
	}
	if l := latest[0]; l.Run != sum.Run || !l.Finished || l.Rows != sum.Rows || !maps.Equal(l.Outcomes, sum.Outcomes) || !slices.Equal(l.Servers, sum.Servers) {
		t.Errorf("Latest %+v, the run's summary %+v", l, sum)
	}
	var text bytes.Buffer
	sum.WriteText(&text)
	for _, s := range []string{"outcomes: answered", "unresolved/nxdomain", "HTTPS:", "servers: nginx", "redirects to another domain: ", "domains per name server: ns1.isp"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("summary text lacks %q:\n%s", s, text.String())
		}
	}
}

// The timeout classes: hanging servers (timeout), filtered ports
// (connect-timeout) and names never answered (dns-timeout), each waited out
// once, beside answers that must come in time. The test is small and runs
// alone, not beside the others, so that only the machine's load, not the
// other tests' work, can delay those answers.
func TestWebTimeouts(t *testing.T) {
	const domains = 100
	w := surveytest.Start(t, surveytest.Options{Domains: domains, Addresses: surveytest.BlockSize})
	list := filepath.Join(t.TempDir(), "domains.txt")
	w.WriteDomains(list)
	spec := webSpec(w)
	spec.Timeout = probeTimeout
	var out bytes.Buffer
	if _, err := survey.RunWeb(context.Background(), survey.WebConfig{
		Config:  survey.Config{StateDir: filepath.Join(t.TempDir(), "state"), Out: &out, Cluster: local(t, 1, w), Spec: spec},
		Domains: list, Resolver: resolverTimeout(t, w, dnsTimeout),
	}); err != nil {
		t.Fatal(err)
	}
	rows := readRows[survey.WebRow](t, out.Bytes())
	if len(rows) != domains {
		t.Fatalf("%d rows, want %d", len(rows), domains)
	}
	classes := map[string]bool{}
	var slowest time.Duration
	for _, r := range rows {
		var i int
		fmt.Sscanf(r.Domain, "d%05d.test", &i)
		checkRow(t, w, i, r)
		classes[r.Class] = true
		for _, p := range r.Probes {
			if p.Class == "" {
				slowest = max(slowest, p.Elapsed)
			}
		}
	}
	for _, c := range []string{survey.WebTimeout, survey.WebConnectTimeout, dnsresolver.ClassTimeout} {
		if !classes[c] {
			t.Errorf("no row of class %s", c)
		}
	}
	checkAsked(t, w)
	t.Logf("the slowest probe that was answered took %v (its waits for its turn included) of the %v each stage is allowed", slowest, probeTimeout)
}

// With --probe-every-vhost every domain is probed on its own.
func TestWebSurveyEveryHost(t *testing.T) {
	t.Parallel()
	const domains = 150
	w := surveytest.Start(t, surveytest.Options{Domains: domains, Addresses: 20, Prompt: true})
	dir := t.TempDir()
	list := filepath.Join(dir, "domains.txt")
	w.WriteDomains(list)
	spec := webSpec(w)
	spec.EveryHost = true
	spec.Schemes = []string{"http"}
	var out bytes.Buffer
	if _, err := survey.RunWeb(context.Background(), survey.WebConfig{
		Config:  survey.Config{StateDir: filepath.Join(dir, "state"), Out: &out, Format: survey.FormatCSV, Cluster: local(t, 1, w), Spec: spec},
		Domains: list, Resolver: resolver(t, w),
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != domains+1 || !strings.HasPrefix(lines[0], "domain,outcome,class,ip,shared_ip") {
		t.Fatalf("CSV: %d lines, header %q", len(lines), lines[0])
	}
	perAddr := map[netip.Addr]int{}
	for i := range domains {
		if c := w.Class(i); c == surveytest.NameNormal || c == surveytest.NameCNAME {
			perAddr[w.Addr(i)]++
		}
	}
	for a, n := range perAddr {
		per, special := map[string]int{surveytest.KindNoHead: 2, surveytest.KindToHTTPS: 2, surveytest.KindClosed: 0}[w.Kind(a)]
		if !special {
			per = 1
		}
		wantN := n * per
		if got := w.Hits(a); got != wantN {
			t.Errorf("%s (%s, %d domains): %d requests, want %d", a, w.Kind(a), n, got, wantN)
		}
		if w.MaxConns(a) > 1 {
			t.Errorf("%s had %d connections at once", a, w.MaxConns(a))
		}
	}
	if strings.Contains(out.String(), ",true,") {
		t.Error("a row is marked shared_ip with every host probed")
	}
}

// A second run in the same state directory copies forward what did not
// change; a domain whose address changed is probed again.
func TestWebRescan(t *testing.T) {
	t.Parallel()
	w := surveytest.Start(t, surveytest.Options{Domains: 200, Addresses: 20, Prompt: true})
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains.txt")
	w.WriteDomains(domains)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	run := func() ([]survey.WebRow, *survey.Summary) {
		var out bytes.Buffer
		spec := webSpec(w)
		spec.Schemes = []string{"http"}
		sum, err := survey.RunWeb(context.Background(), survey.WebConfig{
			Config:  survey.Config{StateDir: filepath.Join(dir, "state"), Out: &out, Cluster: local(t, 1, w), Spec: spec, Now: clock},
			Domains: domains, Resolver: resolver(t, w), MaxAge: time.Hour, MinTTL: time.Minute, MaxTTL: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return readRows[survey.WebRow](t, out.Bytes()), sum
	}
	first, s1 := run()
	hits := w.TotalHits()
	asked := map[string]int{}
	for i := range 200 {
		asked[surveytest.Domain(i)] = w.Asked(surveytest.Domain(i))
	}
	second, s2 := run()
	if w.TotalHits() != hits {
		t.Errorf("the rescan made %d requests, want none", w.TotalHits()-hits)
	}
	for i := range 200 {
		// Failures are not cached: only those names are asked again.
		d := surveytest.Domain(i)
		failed := w.Class(i) == surveytest.NameServFail
		if again := w.Asked(d) > asked[d]; again != failed {
			t.Errorf("%s (%s) asked again: %v", d, w.Class(i), again)
		}
	}
	if s1.Run != "web/1" || s2.Run != "web/2" || len(second) != len(first) {
		t.Fatalf("runs %s %s, rows %d %d", s1.Run, s2.Run, len(first), len(second))
	}
	for _, r := range second {
		if r.Outcome != survey.Unresolved && r.CopiedFrom != "web/1" {
			t.Errorf("%s not copied forward: %+v", r.Domain, r)
		}
	}
	// Move one domain to another address; let the cache expire.
	moved := surveytest.Domain(0)
	w.SetA(moved, w.Addresses()[5])
	mu.Lock()
	now = now.Add(10 * time.Minute)
	mu.Unlock()
	third, _ := run()
	for _, r := range third {
		switch {
		case r.Domain == moved && (r.CopiedFrom != "" || r.IP != w.Addresses()[5].String()):
			t.Errorf("moved domain not probed again: %+v", r)
		case r.Domain != moved && r.Outcome != survey.Unresolved && r.CopiedFrom != "web/2" && r.CopiedFrom != "web/1":
			t.Errorf("%s probed again though unchanged: %+v", r.Domain, r)
		}
	}
}

// lineCanceller cancels a context once n lines went through it.
type lineCanceller struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (l *lineCanceller) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if bytes.Count(l.buf.Bytes(), []byte("\n")) >= l.n {
		l.cancel()
	}
	return len(p), nil
}

// An interrupted survey resumes: the rows committed stay, their
// addresses are not asked again, and the rest are done once.
func TestWebResume(t *testing.T) {
	t.Parallel()
	w := surveytest.Start(t, surveytest.Options{Domains: 400, Addresses: 40, Prompt: true})
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains.txt")
	w.WriteDomains(domains)
	spec := webSpec(w)
	ctx, cancel := context.WithCancel(context.Background())
	lc := &lineCanceller{n: 60, cancel: cancel}
	cfg := survey.WebConfig{Config: survey.Config{StateDir: filepath.Join(dir, "state"), Out: lc, Cluster: localUntil(ctx, t, 1, w), Spec: spec},
		Domains: domains, Resolver: resolver(t, w)}
	sum, err := survey.RunWeb(ctx, cfg)
	if err == nil || sum == nil || sum.Finished {
		t.Fatalf("interrupted run: %v %+v", err, sum)
	}
	done := map[string]int{} // addresses with committed rows → hits then
	for _, r := range readRows[survey.WebRow](t, lc.buf.Bytes()) {
		if r.IP != "" {
			done[r.IP] = w.Hits(netip.MustParseAddr(r.IP))
		}
	}
	var out bytes.Buffer
	cfg.Out, cfg.Cluster = &out, local(t, 1, w)
	sum, err = survey.RunWeb(context.Background(), cfg)
	if err != nil || !sum.Resumed || !sum.Finished {
		t.Fatalf("resumed run: %v %+v", err, sum)
	}
	rows := readRows[survey.WebRow](t, out.Bytes())
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Domain] {
			t.Errorf("%s written twice", r.Domain)
		}
		seen[r.Domain] = true
	}
	if len(rows) != 400 {
		t.Fatalf("%d rows after the resume, want 400", len(rows))
	}
	for ip, hits := range done {
		if got := w.Hits(netip.MustParseAddr(ip)); got != hits {
			t.Errorf("%s was committed before the interruption but asked again (%d requests, then %d)", ip, hits, got)
		}
	}
	_ = wire.SurveyWeb
}

// A domain the blocklist names, or a subdomain of one, is neither looked
// up nor probed: its row says excluded, blocklisted, and where the list
// names it. The other domains are surveyed as usual.
func TestWebSurveyBlocklist(t *testing.T) {
	t.Parallel()
	w := surveytest.Start(t, surveytest.Options{Domains: 20, Addresses: 4, Prompt: true})
	dir := t.TempDir()
	list := filepath.Join(dir, "domains.txt")
	if err := w.WriteDomains(list, "evil.blocked.test", "blocked.test"); err != nil {
		t.Fatal(err)
	}
	bl, err := fetch.ParseBlacklist(strings.NewReader("# never these\nblocked.test\n"), "blocklist.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := survey.RunWeb(context.Background(), survey.WebConfig{
		Config:  survey.Config{StateDir: filepath.Join(dir, "state"), Out: &out, Cluster: local(t, 1, w), Spec: webSpec(w)},
		Domains: list, Resolver: resolver(t, w), Blocklist: bl.Names(),
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, r := range readRows[survey.WebRow](t, out.Bytes()) {
		if !strings.HasSuffix(r.Domain, "blocked.test") {
			continue
		}
		listed++
		if r.Outcome != survey.Excluded || r.Class != survey.WebBlocklisted || r.Listed != "blocklist.txt:2" || len(r.DNS.IPs) > 0 || r.IP != "" {
			t.Errorf("row %+v: want excluded, blocklisted, listed at blocklist.txt:2, no DNS answer, no probe", r)
		}
	}
	if listed != 2 || sum.Outcomes[survey.Excluded] != 2 {
		t.Errorf("%d blocklisted rows, summary outcomes %v; want 2", listed, sum.Outcomes)
	}
	for _, name := range []string{"evil.blocked.test", "blocked.test"} {
		if n := w.Asked(name); n != 0 {
			t.Errorf("%s was looked up %d times", name, n)
		}
	}
	if sum.Rows != 22 {
		t.Errorf("%d rows, want 22", sum.Rows)
	}
}
