package etl

import (
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// MatchKey normalizes a value for attribution comparison, so that
// "  José   DÍAZ " and "jose diaz" agree: compatibility decomposition
// (NFKD), accents and other combining marks removed, lower case, runs of
// white space collapsed to one space, ends trimmed.
func MatchKey(s string) string {
	t := transform.Chain(norm.NFKD, runes.Remove(runes.In(unicode.Mn)))
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return collapseSpace(strings.ToLower(out))
}
