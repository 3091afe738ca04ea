package etl

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// MatchKey normalizes a value for attribution comparison, so that
// "  José   DÍAZ " and "jose diaz" agree: compatibility decomposition
// (NFKD), accents and other combining marks removed, lower case, runs of
// white space collapsed to one space, ends trimmed.
func MatchKey(s string) string {
	if isASCII(s) {
		// NFKD leaves ASCII as it is and it has no marks to remove; the
		// transformer chain costs kilobytes of buffers a call.
		return collapseSpace(strings.ToLower(s))
	}
	return matchKeyUnicode(s)
}

// matchKeyUnicode is MatchKey for any text.
func matchKeyUnicode(s string) string {
	t := transform.Chain(norm.NFKD, runes.Remove(runes.In(unicode.Mn)))
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return collapseSpace(strings.ToLower(out))
}

// isASCII says whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
