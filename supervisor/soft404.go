package supervisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/net/html"

	"backfill/fetch"
	"backfill/store"
)

// Soft 404s: sites that answer a missing page with 200 and a "not found"
// page (or a redirect to the home page) instead of 404. Once per host the
// supervisor asks for an invented path (/backfill-probe-<random>); the
// probe is a request like any other, spaced by the host's delay. A host
// that answers 404 (or any failure) is fine. A host that answers 200
// leaves a fingerprint of that answer, and its pages that resemble it are
// answered "soft-404" with no fields:
//
//   - a page whose body is byte for byte the probe's answer, whatever its
//     path and however it was reached;
//   - a probe redirected elsewhere: pages redirected to the same final URL;
//   - a probe answered in place: pages whose visible text, with the words
//     of their own URL path left out (not-found pages tend to quote the
//     path), is the same as the probe's, or nearly the same: word-pair
//     shingles with an estimated resemblance of at least soft404Resemble
//     and a length within soft404Band of the probe's.
//
// A host's root page is never a soft 404, nor is the page a redirected
// probe landed on, asked for by its own URL: a host that answers every
// path with its home page (or redirects every path there) has a home page
// all the same, and it is the page the others imitate.
//
// The probe comes after the host's first page, not before it, so that a
// record's first page is requested right after robots.txt rather than one
// delay later: the host's first request is its first page, its second
// the probe, and every page after that is judged against the verdict. The
// first page, fetched before the verdict, is judged by how it reads: one
// that looks like a not-found page (looksNotFound: a not-found phrase in
// its title or headings, or among its first soft404Glance words, or a
// status-like word there) is held on its host, its task still queued,
// until the probe has answered, and judged then like any other; any
// other first page goes out at once. A host whose work is one page is
// not probed at all, unless that page looks like a not-found. The cost:
// a soft 404 that says nothing of the kind (a fixed page of links, say)
// passes as a page when it is its host's first, with its fields and
// links; the pages after it are caught. And a first page that merely
// looks like a not-found waits one delay, as every first page did when
// the probe came first. A held page's body is kept, at most
// soft404HoldMax of it and soft404HoldTotal for all held pages at once;
// beyond that a first page goes out unjudged.
//
// The verdict (the fingerprint, or none for a fine host) is written to the
// host cache with the lifetime of the host's robots.txt entry, so a
// restarted supervisor, or another one the host moves to, does not probe
// the host again until its robots.txt is fetched again; its first page is
// judged by the cached verdict.

// ClassSoft404 is the class of a page that resembles its host's answer to
// an invented path. Append only: it crosses the wire.
const ClassSoft404 = "soft-404"

const (
	soft404Prefix   = "/backfill-probe-"
	soft404Sketch   = 128  // shingle hashes kept per fingerprint (a bottom-k sketch)
	soft404Resemble = 0.9  // least estimated resemblance of a soft 404
	soft404Band     = 0.2  // largest relative difference in length
	soft404Tokens   = 5000 // words of a page looked at
	// soft404Glance is how many of a first page's words looksNotFound
	// reads, besides its title and headings.
	soft404Glance = 80
	// soft404HoldMax and soft404HoldTotal bound the bodies of first pages
	// held for their host's probe: one, and all at once.
	soft404HoldMax   = 1 << 20
	soft404HoldTotal = 32 << 20
)

// soft404Print is the fingerprint of a host's answer to an invented path.
type soft404Print struct {
	finalURL string   // where a redirected probe ended; "" when answered in place
	body     [32]byte // SHA-256 of the answer's body as fetched
	exact    uint64   // hash of the normalized word sequence
	words    int
	sketch   []uint64 // the soft404Sketch smallest shingle hashes, sorted
}

// soft404s remembers, per host, whether it was probed and the fingerprint
// (nil for a fine host), until the verdict expires. It holds at most
// Config.MaxHosts hosts; beyond that, the least recently used are
// forgotten and read again from the host cache if they come back.
type soft404s struct {
	mu    sync.Mutex
	hosts *lru[soft404Verdict]
}

type soft404Verdict struct {
	print   *soft404Print
	expires time.Time
}

func newSoft404s(maxHosts int) *soft404s {
	return &soft404s{hosts: newLRU[soft404Verdict](maxHosts, nil)}
}

// known reports whether host has an unexpired verdict, and its fingerprint.
func (s *soft404s) known(host string) (*soft404Print, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.hosts.get(host)
	if ok && !time.Now().Before(v.expires) {
		s.hosts.remove(host)
		return nil, false
	}
	return v.print, ok
}

func (s *soft404s) set(host string, p *soft404Print, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts.put(host, soft404Verdict{print: p, expires: expires})
}

// soft404Stored is a fingerprint as the host cache keeps it.
type soft404Stored struct {
	FinalURL string   `json:"final_url,omitempty"`
	Body     []byte   `json:"body"`
	Exact    uint64   `json:"exact"`
	Words    int      `json:"words"`
	Sketch   []uint64 `json:"sketch"`
}

// encode is p as the host cache keeps it; nil for a fine host.
func (p *soft404Print) encode() []byte {
	if p == nil {
		return nil
	}
	b, _ := json.Marshal(soft404Stored{FinalURL: p.finalURL, Body: p.body[:], Exact: p.exact, Words: p.words, Sketch: p.sketch})
	return b
}

// decodeSoft404 reads a fingerprint from the host cache; an empty one is a
// fine host. ok is false for one that cannot be read (the host is then
// probed again).
func decodeSoft404(b []byte) (p *soft404Print, ok bool) {
	if len(b) == 0 {
		return nil, true
	}
	var st soft404Stored
	if err := json.Unmarshal(b, &st); err != nil || len(st.Body) != sha256.Size || st.Words < 0 {
		return nil, false
	}
	p = &soft404Print{finalURL: st.FinalURL, exact: st.Exact, words: st.Words, sketch: st.Sketch}
	copy(p.body[:], st.Body)
	return p, true
}

// soft404ProbeURL is an invented URL on the host of page.
func soft404ProbeURL(page *url.URL) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return (&url.URL{Scheme: page.Scheme, Host: page.Host, Path: soft404Prefix + hex.EncodeToString(b[:])}).String()
}

// soft404Fingerprint fingerprints a probe's answer; nil means the host
// answers invented paths as it should (or the answer says nothing).
func soft404Fingerprint(probeURL string, resp *fetch.Response, err error) *soft404Print {
	if err == nil && resp != nil && resp.Next != "" {
		// Sent elsewhere (the probe's hop is not followed: it would be a
		// request of its own): pages sent to the same place are soft 404s.
		return &soft404Print{finalURL: resp.Next}
	}
	if err != nil || resp == nil || resp.Status < 200 || resp.Status > 299 {
		return nil
	}
	p := textPrint(resp.Body, probeURL, resp.URL)
	p.body = sha256.Sum256(resp.Body)
	if resp.URL != "" && resp.URL != probeURL {
		p.finalURL = resp.URL
	}
	return p
}

// matches reports whether a page fetched for taskURL resembles the probe.
func (p *soft404Print) matches(taskURL string, resp *fetch.Response) bool {
	if p == nil || resp == nil || resp.Status < 200 || resp.Status > 299 {
		return false
	}
	if u, err := url.Parse(taskURL); err != nil || (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		return false
	}
	if p.finalURL != "" {
		if taskURL == p.finalURL {
			return false // the landing page itself, asked for by name
		}
		return resp.URL == p.finalURL || sha256.Sum256(resp.Body) == p.body
	}
	if sha256.Sum256(resp.Body) == p.body {
		return true
	}
	q := textPrint(resp.Body, taskURL, resp.URL)
	if q.exact == p.exact && q.words == p.words {
		return true
	}
	lo, hi := min(p.words, q.words), max(p.words, q.words)
	if lo == 0 || float64(hi-lo) > soft404Band*float64(hi) {
		return false
	}
	return resemblance(p.sketch, q.sketch) >= soft404Resemble
}

// textPrint fingerprints the visible text of an HTML body, leaving out the
// words of the given URLs' paths.
func textPrint(body []byte, urls ...string) *soft404Print {
	skip := map[string]bool{}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil {
			for _, w := range words(u.Path + " " + u.RawQuery) {
				skip[w] = true
			}
		}
	}
	var ws []string
	for _, w := range visibleWords(body, soft404Tokens) {
		if !skip[w] {
			ws = append(ws, w)
		}
	}
	p := &soft404Print{words: len(ws)}
	h := fnv.New64a()
	for _, w := range ws {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	p.exact = h.Sum64()
	seen := map[uint64]bool{}
	for i := range ws {
		sh := fnv.New64a()
		sh.Write([]byte(ws[i]))
		if i+1 < len(ws) {
			sh.Write([]byte{0})
			sh.Write([]byte(ws[i+1]))
		} else if i > 0 {
			continue // the last word is in the previous pair
		}
		seen[sh.Sum64()] = true
	}
	for v := range seen {
		p.sketch = append(p.sketch, v)
	}
	slices.Sort(p.sketch)
	if len(p.sketch) > soft404Sketch {
		p.sketch = p.sketch[:soft404Sketch]
	}
	return p
}

// resemblance estimates the Jaccard resemblance of two shingle sets from
// their bottom-k sketches (exact when both sets are smaller than k).
func resemblance(a, b []uint64) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	k := max(len(a), len(b))
	inA := map[uint64]bool{}
	for _, v := range a {
		inA[v] = true
	}
	inB := map[uint64]bool{}
	for _, v := range b {
		inB[v] = true
	}
	union := slices.Concat(a, b)
	slices.Sort(union)
	union = slices.Compact(union)
	if len(union) > k {
		union = union[:k]
	}
	both := 0
	for _, v := range union {
		if inA[v] && inB[v] {
			both++
		}
	}
	return float64(both) / float64(len(union))
}

// visibleWords lists the lower-case words of an HTML body's text (title
// included, scripts and styles not), at most limit of them.
func visibleWords(body []byte, limit int) []string {
	z := html.NewTokenizer(bytes.NewReader(body))
	var out []string
	hidden := 0
	for len(out) < limit {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken:
			if name, _ := z.TagName(); isHiddenTag(name) {
				hidden++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); isHiddenTag(name) && hidden > 0 {
				hidden--
			}
		case html.TextToken:
			if hidden == 0 {
				out = append(out, words(string(z.Text()))...)
			}
		}
	}
	return out[:limit]
}

func isHiddenTag(name []byte) bool {
	switch string(name) {
	case "script", "style", "noscript", "template":
		return true
	}
	return false
}

// words splits s into lower-case runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// notFoundPhrases are word sequences (as words splits them) that say a
// page is missing, in a page's title, headings or first words.
var notFoundPhrases = [][]string{
	{"not", "found"}, {"notfound"},
	{"does", "not", "exist"}, {"doesn", "t", "exist"}, {"no", "longer", "exists"}, {"no", "longer", "available"},
	{"cannot", "be", "found"}, {"can", "t", "be", "found"}, {"could", "not", "be", "found"}, {"couldn", "t", "be", "found"},
	{"could", "not", "find"}, {"couldn", "t", "find"}, {"cannot", "find"}, {"can", "t", "find"},
	{"nothing", "here"}, {"nothing", "found"}, {"no", "such"}, {"not", "available"}, {"unavailable"}, {"oops"},
	{"nicht", "gefunden"}, {"introuvable"}, {"no", "encontrada"}, {"no", "encontrado"}, {"non", "trovata"},
	{"non", "trovato"}, {"niet", "gevonden"}, {"não", "encontrada"}, {"não", "encontrado"}, {"nie", "znaleziono"},
}

// notFoundTitleWords say a page is missing when its title or a heading
// holds them, not its text.
var notFoundTitleWords = map[string]bool{"404": true, "410": true, "error": true, "sorry": true, "missing": true, "gone": true}

// looksNotFound reports whether an HTML body reads like a not-found page:
// a not-found phrase in its title or its h1–h3 headings, or among its
// first soft404Glance visible words, or a word of notFoundTitleWords in
// its title or headings. It is the first page's judge until its host's
// probe answers (see above): a page it passes goes out unjudged, one it
// flags waits for the probe, so it errs towards flagging.
func looksNotFound(body []byte) bool {
	z := html.NewTokenizer(bytes.NewReader(body))
	hidden, heading := 0, 0
	var text []string
	for len(text) < soft404Glance {
		switch z.Next() {
		case html.ErrorToken:
			return hasNotFoundPhrase(text)
		case html.StartTagToken:
			name, _ := z.TagName()
			switch {
			case isHiddenTag(name):
				hidden++
			case isHeadingTag(name):
				heading++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch {
			case isHiddenTag(name) && hidden > 0:
				hidden--
			case isHeadingTag(name) && heading > 0:
				heading--
			}
		case html.TextToken:
			if hidden > 0 {
				continue
			}
			ws := words(string(z.Text()))
			if heading > 0 && (hasNotFoundPhrase(ws) || slices.ContainsFunc(ws, func(w string) bool { return notFoundTitleWords[w] })) {
				return true
			}
			text = append(text, ws...)
		}
	}
	return hasNotFoundPhrase(text[:soft404Glance])
}

// isHeadingTag: the title and the top headings, where a page names itself.
func isHeadingTag(name []byte) bool {
	switch string(name) {
	case "title", "h1", "h2", "h3":
		return true
	}
	return false
}

// hasNotFoundPhrase reports whether ws holds one of notFoundPhrases.
func hasNotFoundPhrase(ws []string) bool {
	for i := range ws {
		for _, ph := range notFoundPhrases {
			if i+len(ph) <= len(ws) && slices.Equal(ws[i:i+len(ph)], ph) {
				return true
			}
		}
	}
	return false
}

// soft404Verdict is h's verdict, from memory or else the host cache; known
// is false while the host is to be probed. With NoSoft404 every host is
// taken as fine.
func (s *Supervisor) soft404Verdict(ctx context.Context, h *host) (p *soft404Print, known bool) {
	if s.cfg.NoSoft404 {
		return nil, true
	}
	if p, ok := s.soft404.known(h.name); ok {
		return p, true
	}
	if h.robots == nil || !s.cachedSoft404(ctx, h.name) {
		return nil, false
	}
	return s.soft404.known(h.name)
}

// probeSoft404 makes h's soft-404 probe unless its verdict is known, here
// or in the host cache: the turn's one request, after the host's first
// page (see above). It reports whether a request was made. A probe path robots.txt disallows is not asked for;
// the host then goes unprobed. A verdict lives as long as the host's
// robots.txt rules.
func (s *Supervisor) probeSoft404(ctx context.Context, h *host, page *url.URL) bool {
	if s.cfg.NoSoft404 {
		return false
	}
	if _, ok := s.soft404.known(h.name); ok {
		return false
	}
	if h.robots == nil {
		return false
	}
	if s.cachedSoft404(ctx, h.name) {
		return false
	}
	expires := h.robots.expires
	probe := soft404ProbeURL(page)
	pu, err := url.Parse(probe)
	if err != nil || !h.robots.allowed(pu) {
		s.soft404.set(h.name, nil, expires)
		return false
	}
	s.soft404Probes.Add(1)
	start := time.Now()
	resp, end, err := s.request(ctx, h, probe, fetch.Request{}, s.delay(h.robots))
	if ctx.Err() != nil {
		return true // shutting down; nothing learned
	}
	s.health.observe(h.name, resp, err, s.delay(h.robots), end)
	fp := soft404Fingerprint(probe, resp, err)
	s.soft404.set(h.name, fp, expires)
	if fp != nil {
		s.log.Debug("host answers invented paths with 200; pages like that answer are soft 404s",
			"host", h.name, "probe", probe, "final_url", resp.URL)
	}
	if resp == nil || resp.Status == 0 {
		return true // no answer: a restarted process may ask again
	}
	cctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	v := store.Soft404{Print: fp.encode(), ProbedAt: start.UTC(), Expires: expires.UTC()}
	if err := s.cache.PutSoft404(cctx, h.name, v); err != nil && ctx.Err() == nil {
		s.cacheFailed("put soft-404 verdict", h.name, err)
	}
	return true
}

// cachedSoft404 takes host's verdict from the host cache into memory, if
// the cache has an unexpired one it can read, and reports whether it did.
func (s *Supervisor) cachedSoft404(ctx context.Context, host string) bool {
	v, ok := fromCache(ctx, s, "read soft-404 verdict", host, s.cache.Soft404)
	if !ok || !time.Now().Before(v.Expires) {
		return false
	}
	fp, ok := decodeSoft404(v.Print)
	if !ok {
		return false
	}
	s.soft404.set(host, fp, v.Expires)
	return true
}
