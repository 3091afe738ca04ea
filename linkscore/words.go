package linkscore

import (
	"net/url"
	"slices"
	"strings"
	"unicode"

	"backfill/etl"
)

// MinWord is the shortest word of a known value looked for in a link:
// shorter ones ("li", "de") are in too many addresses.
const MinWord = 3

// maxWords bounds the words taken from a record's values.
const maxWords = 16

// letters folds what etl.MatchKey leaves of letters that addresses write
// otherwise: NFKD has no decomposition for these.
var letters = strings.NewReplacer("ł", "l", "ø", "o", "đ", "d", "ð", "d", "þ", "th", "ß", "ss",
	"æ", "ae", "œ", "oe", "ı", "i", "ħ", "h", "ŧ", "t")

// Fold folds a text as the scoring compares it: etl.MatchKey (accents
// off, lower case, white space collapsed), then letters without a
// decomposition to their usual spelling in addresses (ł → l, ø → o,
// ß → ss).
func Fold(s string) string {
	k := etl.MatchKey(s)
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return letters.Replace(k)
		}
	}
	return k
}

// Words are the words of values, folded (Fold), split at whatever is
// neither a letter nor a digit, those of at least MinWord bytes, each
// once, at most maxWords of them.
func Words(values ...string) []string {
	var out []string
	for _, v := range values {
		for _, w := range strings.FieldsFunc(Fold(v), notWordRune) {
			if len(w) >= MinWord && !slices.Contains(out, w) {
				if len(out) == maxWords {
					return out
				}
				out = append(out, w)
			}
		}
	}
	return out
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// Address is the part of a URL that says what it leads to, folded: its
// path and query, unescaped where they can be. The host is left out: it
// names the site, which every link of the site shares.
func Address(rawURL string) string {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ""
	}
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return ""
	}
	rest = rest[i:]
	if j := strings.IndexByte(rest, '#'); j >= 0 {
		rest = rest[:j]
	}
	if u, err := url.PathUnescape(rest); err == nil {
		rest = u
	}
	return Fold(rest)
}

// Name says how many of words (a record's match-key words, from Words)
// the folded address or anchor text holds, each as a part of a word or
// more (a slug writes "ada-lovelace", "adalovelace" or "lovelace_a").
// NameUnknown when words is empty.
func Name(words []string, address, anchor string) Naming {
	if len(words) == 0 {
		return NameUnknown
	}
	n := 0
	for _, w := range words {
		if strings.Contains(address, w) || strings.Contains(anchor, w) {
			n++
		}
	}
	switch {
	case n == len(words):
		return NameFull
	case n > 0:
		return NamePart
	}
	return NameNone
}

// Holds reports whether the folded address or anchor text holds one of
// words.
func Holds(words []string, address, anchor string) bool {
	for _, w := range words {
		if strings.Contains(address, w) || strings.Contains(anchor, w) {
			return true
		}
	}
	return false
}
