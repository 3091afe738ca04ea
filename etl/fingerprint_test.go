package etl

import (
	"crypto/sha256"
	"math/rand/v2"
	"strings"
	"testing"

	"backfill/testweb"
	"golang.org/x/net/html"
)

// refFingerprint is TextFingerprint written the plain way (split, trim,
// one signed counter per bit), to check the streaming, bit-sliced one.
func refFingerprint(text string) Fingerprint {
	words := strings.Fields(strings.ToLower(text))
	var fp Fingerprint
	sum := sha256.Sum256([]byte(strings.Join(words, " ")))
	copy(fp.Exact[:], sum[:])
	fp.Words = len(words)
	var hs []uint64
	for _, w := range words {
		if core := trimPunct([]byte(w)); len(core) > 0 {
			hs = append(hs, fmix64(fnv1a64(core)))
		}
	}
	var shingles [][]uint64
	for i := 0; i+shingleWords <= len(hs); i++ {
		shingles = append(shingles, hs[i:i+shingleWords])
	}
	if len(shingles) == 0 && len(hs) > 0 {
		shingles = append(shingles, hs)
	}
	var counts [64]int
	for _, sh := range shingles {
		h := uint64(len(sh))
		for _, w := range sh {
			h = h*0x9e3779b97f4a7c15 + w
		}
		h = fmix64(h)
		for i := range counts {
			if h>>uint(i)&1 == 1 {
				counts[i]++
			} else {
				counts[i]--
			}
		}
	}
	for i, c := range counts {
		if c > 0 {
			fp.Sim |= 1 << uint(i)
		}
	}
	return fp
}

func TestTextFingerprint(t *testing.T) {
	base := "The quick brown fox jumps over the lazy dog near the river bank today"
	tests := []struct {
		name       string
		a, b       string
		sameExact  bool
		sameSim    bool
		wordsOfA   int
		wantSimA0  bool // a's simhash is 0 (no words)
		maxSimDist int  // when !sameSim: distance at most this (-1: no bound)
	}{
		{"identical", base, base, true, true, 14, false, 0},
		{"case", base, strings.ToUpper(base), true, true, 14, false, 0},
		{"white space", base, "  " + strings.ReplaceAll(base, " ", " \n\t ") + "\n", true, true, 14, false, 0},
		{"non-breaking and ideographic space", "a b c", "a\u00a0b\u3000c", true, true, 3, false, 0},
		{"punctuation at word ends", base, strings.ReplaceAll(base, "fox", "fox,") + ".", false, true, 14, false, 0},
		{"punctuation-only word", base, strings.Replace(base, "dog", "dog —", 1), false, true, 14, false, 0},
		{"unicode case", "ÉCOLE Straße ΣΟΦΙΑ", "école straße σοφια", true, true, 3, false, 0},
		{"different word", base, strings.Replace(base, "lazy", "sleepy", 1), false, false, 14, false, -1},
		{"word order", "alpha beta gamma delta", "delta gamma beta alpha", false, false, 4, false, -1},
		{"empty", "", " \n\t ", true, true, 0, true, 0},
		{"invalid utf-8 is U+FFFD", "caf\xe9 bar", "caf\ufffd bar", true, true, 2, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := TextFingerprint(tc.a), TextFingerprint(tc.b)
			if (a.Exact == b.Exact) != tc.sameExact {
				t.Errorf("exact equal = %v, want %v", a.Exact == b.Exact, tc.sameExact)
			}
			if (a.Sim == b.Sim) != tc.sameSim {
				t.Errorf("sim %016x vs %016x: equal = %v, want %v", a.Sim, b.Sim, a.Sim == b.Sim, tc.sameSim)
			}
			if a.Words != tc.wordsOfA {
				t.Errorf("words = %d, want %d", a.Words, tc.wordsOfA)
			}
			if (a.Sim == 0) != tc.wantSimA0 {
				t.Errorf("sim = %016x, want zero: %v", a.Sim, tc.wantSimA0)
			}
			if ref := refFingerprint(tc.a); ref != a {
				t.Errorf("fingerprint %+v differs from the reference %+v", a, ref)
			}
		})
	}
}

// TestTextFingerprintMatchesReference compares the streaming, bit-sliced
// implementation with the plain one on random texts, from one word to
// thousands, with repeated shingles and punctuation.
func TestTextFingerprintMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	vocab := []string{"a", "the", "fox", "Fox.", "—", "…", "über", "x1", "(see", "it)", "data", "42", "ünïcödé", "end."}
	for i := range 200 {
		n := 1 + r.IntN(1+i*5)
		w := make([]string, n)
		for j := range w {
			w[j] = vocab[r.IntN(len(vocab))]
		}
		text := strings.Join(w, []string{" ", "\n", "  ", "\t"}[r.IntN(4)])
		if got, want := TextFingerprint(text), refFingerprint(text); got != want {
			t.Fatalf("text %d (%d words): %+v, reference %+v", i, n, got, want)
		}
	}
}

// genWords generates pages of prose-like text (testweb.Prose) and keeps
// the random source for the tests' other draws.
type genWords struct {
	r *rand.Rand
	*testweb.Prose
}

func newGenWords(seed uint64) *genWords {
	r := rand.New(rand.NewPCG(seed, ^seed))
	return &genWords{r: r, Prose: testweb.NewProse(r)}
}

// TestFingerprintOneWordEdit: replacing one word of a 500-word page moves the simhash
// a few bits, and at most 3 for most pages. A one-word edit changes 3 of
// ~500 shingles; each bit's ±1 sum (spread ~√500 ≈ 22) crosses zero with
// probability about 3%, so about 2 of 64 bits flip on average and about
// one page in six lands beyond 3: that is what simhash at k = 3 detects,
// not a defect of this implementation.
func TestFingerprintOneWordEdit(t *testing.T) {
	g := newGenWords(1)
	const pages = 300
	hist := make([]int, 65)
	var sum int
	for range pages {
		w := g.Words(500)
		a := TextFingerprint(strings.Join(w, " "))
		w[g.r.IntN(len(w))] = "qqedited"
		b := TextFingerprint(strings.Join(w, " "))
		if a.Exact == b.Exact {
			t.Fatal("an edited page has the same exact hash")
		}
		d := SimDistance(a.Sim, b.Sim)
		hist[d]++
		sum += d
	}
	within := hist[0] + hist[1] + hist[2] + hist[3]
	t.Logf("one-word edits of 500-word pages: distance histogram %v, within 3: %d of %d, mean %.2f", hist[:10], within, pages, float64(sum)/pages)
	if within < pages*3/4 || float64(sum)/pages > 3 {
		t.Fatalf("one-word edits too far apart: %d of %d within 3, mean distance %.2f", within, pages, float64(sum)/pages)
	}
	// A fixed page and edit, so one case is exact rather than statistical.
	w := newGenWords(2).Words(500)
	a := TextFingerprint(strings.Join(w, " "))
	w[250] = "changed"
	if d := SimDistance(a.Sim, TextFingerprint(strings.Join(w, " ")).Sim); d > 3 {
		t.Fatalf("fixed one-word edit: distance %d, want ≤ 3", d)
	}
}

// TestFingerprintUnrelatedPages: 1,000 unrelated pages of 100 to 500 words
// over the same vocabulary; no pair (of 499,500) is within distance 3.
func TestFingerprintUnrelatedPages(t *testing.T) {
	g := newGenWords(3)
	sims := make([]uint64, 1000)
	for i := range sims {
		sims[i] = TextFingerprint(strings.Join(g.Words(100+g.r.IntN(400)), " ")).Sim
	}
	closest := 64
	for i := range sims {
		for j := i + 1; j < len(sims); j++ {
			if d := SimDistance(sims[i], sims[j]); d < closest {
				closest = d
			}
		}
	}
	t.Logf("closest pair among %d unrelated pages: distance %d", len(sims), closest)
	if closest <= 3 {
		t.Fatalf("unrelated pages at distance %d", closest)
	}
}

func TestFingerprintVisibleText(t *testing.T) {
	tests := []struct {
		name, html, want string
	}{
		{"blocks separate words", `<p>alpha</p><p>beta</p>`, "alpha beta"},
		{"inline does not", `<p><b>Wo</b>rd and <a href="/x">li</a>nk</p>`, "Word and link"},
		{"line break", `one<br>two`, "one two"},
		{"title counts", `<html><head><title>Page Title</title><meta name="description" content="not text"></head><body>Body</body></html>`, "Page Title Body"},
		{"script and style", `<p>keep</p><script>var drop = 1;</script><style>p{color:red}</style><p>this</p>`, "keep this"},
		{"noscript template iframe object", `a<noscript>no</noscript><template>tpl</template><iframe>fr</iframe><object>ob</object>b`, "a b"},
		{"hidden attribute", `<div>shown</div><div hidden>secret <p>deep</p></div><div>too</div>`, "shown too"},
		{"comments", `x<!-- comment -->y`, "xy"},
		{"entities", `<p>caf&eacute; &amp; bar</p>`, "café & bar"},
		{"table cells", `<table><tr><td>c1</td><td>c2</td></tr></table>`, "c1 c2"},
		{"empty", ``, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, err := html.Parse(strings.NewReader(tc.html))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(strings.Fields(VisibleText(root)), " ")
			if got != tc.want {
				t.Fatalf("VisibleText = %q, want %q", got, tc.want)
			}
		})
	}
	if VisibleText(nil) != "" {
		t.Fatal("VisibleText(nil) is not empty")
	}
	// A subtree: only its text.
	root, _ := html.Parse(strings.NewReader(`<div id=a>inside <i>it</i></div><div>outside</div>`))
	var div *html.Node
	walk(root, func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "div" {
			div = n
			return false
		}
		return true
	})
	if got := strings.TrimSpace(VisibleText(div)); got != "inside it" {
		t.Fatalf("VisibleText(div) = %q, want %q", got, "inside it")
	}
}

func TestPageFingerprint(t *testing.T) {
	const text = "Ann Lee is an engineer in Lisbon who writes about engines and numbers"
	page := func(extra string) []byte {
		return []byte(`<html><head><title>Ann</title><script>track(` + extra + `)</script></head><body><nav class="` + extra + `">Home</nav><p>` + text + `</p></body></html>`)
	}
	a := PageFingerprint("https://a.example/ann", page("1"), "text/html")
	b := PageFingerprint("https://b.example/ann", page("2"), "text/html; charset=utf-8")
	if a != b {
		t.Fatalf("pages differing only in markup and scripts: %+v vs %+v", a, b)
	}
	if want := TextFingerprint("Ann Home " + text); a != want {
		t.Fatalf("page fingerprint %+v, want that of its visible text %+v", a, want)
	}
	j := PageFingerprint("https://a.example/api", []byte(`{"name": "Ann"}`), "application/json")
	if want := TextFingerprint(`{"name": "Ann"}`); j != want {
		t.Fatalf("JSON fingerprint %+v, want that of its body %+v", j, want)
	}
}

// FuzzTextFingerprint: never panics, deterministic, agrees with the plain
// reference, and the exact hash is that of the normalized words.
func FuzzTextFingerprint(f *testing.F) {
	for _, s := range []string{"", " ", "a", "a b", "a b c d", "Hello, World!", "caf\xe9 \xff\xfe", "— … ·", "ÉCOLE\u00a0straße"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, b := TextFingerprint(s), TextFingerprint(s)
		if a != b {
			t.Fatalf("not deterministic: %+v vs %+v", a, b)
		}
		if ref := refFingerprint(s); a != ref {
			t.Fatalf("%+v, reference %+v", a, ref)
		}
		if a.Words == 0 && a.Sim != 0 {
			t.Fatalf("no words but sim %016x", a.Sim)
		}
	})
}

// FuzzPageFingerprint: any body, HTML or not, fingerprints without panic
// and the same way twice.
func FuzzPageFingerprint(f *testing.F) {
	for _, s := range []string{"", "<p>a</p>", "<script>x", "<div hidden><p>x</div>y", `{"a":1}`, "<table><td>a<td>b", "\x00<\xff>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a := PageFingerprint("https://site.example/p", body, "text/html")
		if b := PageFingerprint("https://site.example/p", body, "text/html"); a != b {
			t.Fatalf("not deterministic: %+v vs %+v", a, b)
		}
	})
}

func BenchmarkTextFingerprint(b *testing.B) {
	text := strings.Join(newGenWords(4).Words(10_000), " ")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		TextFingerprint(text)
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "words/s")
}
