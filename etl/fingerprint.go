package etl

import (
	"crypto/sha256"
	"hash"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Fingerprint identifies a page's content for the content-seen test: two
// pages with the same Exact hash show the same text, two pages whose Sim
// hashes differ in few bits (Hamming distance) show nearly the same text.
//
// Both are taken over the page's normalized visible text, never over its
// markup, so that pages that differ only in attributes, scripts, styles or
// tracking parameters in links count as the same content.
type Fingerprint struct {
	// Exact is the first 128 bits of SHA-256 over the normalized text (its
	// words, lower-cased, joined by single spaces). 128 bits keep the chance
	// that two different pages collide negligible at any crawl size (about
	// n²/2¹²⁹), which matters because a collision would silently drop a
	// page's links as a "duplicate".
	Exact [16]byte
	// Sim is a 64-bit simhash of the text's 3-word shingles; see
	// TextFingerprint.
	Sim uint64
	// Words is how many words the normalized text has. Pages with very few
	// words (empty shells, "Loading…" stubs waiting for a renderer) all look
	// alike; callers should not treat those as duplicates of each other.
	Words int
}

// shingleWords is the shingle size: every run of this many consecutive
// words is one feature of the simhash. One word per feature would make two
// unrelated pages over the same vocabulary look alike (their word
// frequencies agree); longer shingles make a one-word edit touch more
// features (k of them), moving more bits. Three is the usual balance.
const shingleWords = 3

// TextFingerprint fingerprints text, typically a page's visible text (see
// VisibleText).
//
// Normalization: the text is lower-cased (Unicode simple case mapping) and
// split at white space into words; Exact hashes those words joined by one
// space, so any run of white space counts as one and leading or trailing
// space not at all.
//
// Simhash: each word, with punctuation trimmed from both ends (so "end."
// and "end" are the same word; a word of punctuation alone is dropped), is
// hashed with 64-bit FNV-1a and a murmur3 finalizer (FNV alone mixes its
// high bits poorly on short inputs, and every bit of a simhash feature must
// be a fair coin). Each 3-word shingle's hash combines its words' hashes in
// order (shingleHash). Every shingle occurrence adds +1 to counter i when bit i of its
// hash is set and -1 otherwise, so a shingle weighs as often as it occurs;
// bit i of Sim is set when counter i ends positive (ties give 0). A text of one or two
// words is one shingle of those words; a text with no words has Sim 0.
//
// Similar texts get simhashes at a small Hamming distance: editing one word
// changes at most 3 of n shingles, each moving every counter by one. On a
// 500-word page that flips about two of the 64 bits on average, while
// unrelated pages differ in about 32.
//
// TextFingerprint never fails: invalid UTF-8 is treated as U+FFFD, and the
// result depends on the text alone (same text, same fingerprint, in every
// process and on every machine).
func TextFingerprint(text string) Fingerprint {
	var f fingerprinter
	f.exact = sha256.New()
	f.norm = make([]byte, 0, 4096)
	f.word = make([]byte, 0, 64)
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf { // ASCII: the common case, without rune decoding
			i++
			if asciiSpace[c] {
				f.endWord()
				continue
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			f.word = append(f.word, c)
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:]) // invalid UTF-8 yields U+FFFD
		i += n
		if unicode.IsSpace(r) {
			f.endWord()
			continue
		}
		f.word = utf8.AppendRune(f.word, unicode.ToLower(r))
	}
	f.endWord()
	if f.shingles == 0 && f.inWin > 0 {
		f.addShingle(f.inWin) // too short for a full shingle: one of what there is
	}
	f.fp.Sim = f.ones.majority()
	f.exact.Write(f.norm)
	copy(f.fp.Exact[:], f.exact.Sum(nil))
	return f.fp
}

// asciiSpace marks the ASCII bytes unicode.IsSpace accepts.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// fingerprinter is the state of one TextFingerprint call.
type fingerprinter struct {
	fp       Fingerprint
	exact    hash.Hash
	norm     []byte // normalized text not yet hashed into exact
	word     []byte // the current word, lower-cased
	ones     bitCounts
	win      [shingleWords]uint64 // hashes of the last words, oldest first
	inWin    int                  // words in win (up to shingleWords)
	shingles int
}

func (f *fingerprinter) endWord() {
	if len(f.word) == 0 {
		return
	}
	if f.fp.Words > 0 {
		f.norm = append(f.norm, ' ')
	}
	f.norm = append(f.norm, f.word...)
	if len(f.norm) >= 4096 {
		f.exact.Write(f.norm)
		f.norm = f.norm[:0]
	}
	f.fp.Words++
	core := trimPunct(f.word)
	f.word = f.word[:0]
	if len(core) == 0 {
		return
	}
	copy(f.win[:], f.win[1:])
	f.win[shingleWords-1] = fmix64(fnv1a64(core))
	if f.inWin < shingleWords {
		f.inWin++
	}
	if f.inWin == shingleWords {
		f.addShingle(shingleWords)
	}
}

// addShingle adds the shingle of the last n words.
func (f *fingerprinter) addShingle(n int) {
	f.ones.add(shingleHash(f.win[shingleWords-n:]))
	f.shingles++
}

// shingleHash combines the hashes of a shingle's words, in order. The word
// hashes are already well mixed, so a multiply-add chain keeps the order
// and one finalizer spreads the result.
func shingleHash(words []uint64) uint64 {
	h := uint64(len(words))
	for _, w := range words {
		h = h*0x9e3779b97f4a7c15 + w
	}
	return fmix64(h)
}

// bitCounts counts, for each of 64 bit positions, how many added words had
// that bit set. The counters are bit-sliced: plane j holds bit j of all 64
// counters, so adding a word is a ripple-carry over the planes (two steps
// on average) instead of 64 separate increments.
type bitCounts struct {
	planes [64]uint64
	n      uint64 // words added
}

func (c *bitCounts) add(h uint64) {
	for j := 0; h != 0; j++ {
		carry := c.planes[j] & h
		c.planes[j] ^= h
		h = carry
	}
	c.n++
}

// majority returns the word whose bit i is set when more than half of the
// added words had bit i set: the sign of the ±1 sum a simhash takes.
func (c *bitCounts) majority() uint64 {
	var m uint64
	for i := range 64 {
		var ones uint64
		for j, p := range c.planes {
			ones |= (p >> uint(i) & 1) << uint(j)
		}
		if 2*ones > c.n {
			m |= 1 << uint(i)
		}
	}
	return m
}

// trimPunct trims Unicode punctuation and symbols from both ends of a
// lower-cased word.
func trimPunct(w []byte) []byte {
	for len(w) > 0 {
		r, n := utf8.DecodeRune(w)
		if !isPunctOrSymbol(r) {
			break
		}
		w = w[n:]
	}
	for len(w) > 0 {
		r, n := utf8.DecodeLastRune(w)
		if !isPunctOrSymbol(r) {
			break
		}
		w = w[:len(w)-n]
	}
	return w
}

func isPunctOrSymbol(r rune) bool {
	if r < utf8.RuneSelf {
		return r < '0' || ('9' < r && r < 'a') || 'z' < r // lower-cased already; controls count too
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

// fnv1a64 is 64-bit FNV-1a, written out so hashing a word allocates nothing.
func fnv1a64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// fmix64 is the murmur3 64-bit finalizer: every input bit affects every
// output bit with probability close to one half.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// SimDistance is the Hamming distance between two simhashes: how many of
// their 64 bits differ.
func SimDistance(a, b uint64) int { return bits.OnesCount64(a ^ b) }

// VisibleText returns the text a reader sees on an HTML page: the text of
// every node except those inside script, style, noscript, template,
// iframe, object and elements with the hidden attribute (their content is
// code, markup or not shown). Comments are not text. Block-level elements
// and line breaks separate words ("<p>a</p><p>b</p>" is "a b"); inline
// elements do not ("<b>W</b>ord" is "Word"). The title is part of the text.
// A nil root has no text. At most maxFingerprintText bytes are kept.
func VisibleText(root *html.Node) string {
	if root == nil {
		return ""
	}
	var b strings.Builder
	pending := false // a block boundary was passed since the last text
	gap := func() { pending = true }
	// An iterative walk with explicit enter and leave, so that deeply
	// nested pages cannot exhaust the stack.
	n := root
	for {
		descend := false
		switch n.Type {
		case html.TextNode:
			if n.Data == "" {
				break
			}
			if pending && b.Len() > 0 {
				b.WriteByte(' ')
			}
			pending = false
			if b.Len()+len(n.Data) >= maxFingerprintText {
				// Enough to tell pages apart; the rest would only cost
				// memory on the largest pages.
				b.WriteString(n.Data[:maxFingerprintText-b.Len()])
				return b.String()
			}
			b.WriteString(n.Data)
		case html.ElementNode:
			if !inlineElement(n.DataAtom) {
				gap()
			}
			descend = !hiddenElement(n)
		case html.DocumentNode:
			descend = true
		}
		if descend && n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		// Leave n, and every ancestor whose last child we have just left.
		for {
			if n.Type == html.ElementNode && !inlineElement(n.DataAtom) {
				gap()
			}
			if n == root {
				return b.String()
			}
			if n.NextSibling != nil {
				n = n.NextSibling
				break
			}
			n = n.Parent
			if n == nil { // root was not an ancestor: cannot happen, but never loop
				return b.String()
			}
		}
	}
}

// hiddenElement reports whether n's content is not shown as text.
func hiddenElement(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Iframe, atom.Object:
		return true
	}
	for _, a := range n.Attr {
		if a.Key == "hidden" && a.Namespace == "" {
			return true
		}
	}
	return false
}

// inlineElement reports whether an element flows inside a line of text, so
// its boundaries do not separate words.
func inlineElement(a atom.Atom) bool {
	switch a {
	case atom.A, atom.Abbr, atom.B, atom.Bdi, atom.Bdo, atom.Cite, atom.Code,
		atom.Data, atom.Dfn, atom.Em, atom.Font, atom.I, atom.Kbd, atom.Mark,
		atom.Q, atom.S, atom.Samp, atom.Small, atom.Span, atom.Strike,
		atom.Strong, atom.Sub, atom.Sup, atom.Time, atom.Tt, atom.U, atom.Var,
		atom.Wbr:
		return true
	}
	return false
}

// maxFingerprintText bounds the text a fingerprint reads: far more than a
// page needs to be told apart, far less than the largest pages hold.
const maxFingerprintText = 256 << 10

// HTMLFingerprint fingerprints the visible text of a parsed HTML page.
func HTMLFingerprint(root *html.Node) Fingerprint {
	return TextFingerprint(VisibleText(root))
}

// PageFingerprint fingerprints a fetched page the way Extract would parse
// it: the visible text of an HTML page, the body itself of a JSON document
// or of a page that does not parse. It never fails.
func PageFingerprint(pageURL string, body []byte, contentType string) Fingerprint {
	d := NewDocument(pageURL, body, contentType)
	if d.Root != nil {
		return HTMLFingerprint(d.Root)
	}
	return bodyFingerprint(d.Body)
}

// bodyFingerprint fingerprints a document that is not HTML by its body.
func bodyFingerprint(body string) Fingerprint {
	if len(body) > maxFingerprintText {
		body = body[:maxFingerprintText]
	}
	return TextFingerprint(body)
}
