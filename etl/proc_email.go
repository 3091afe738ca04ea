package etl

import (
	"html"
	"regexp"
	"strings"
)

// emailProc finds the email addresses in each value, undoing the usual
// obfuscations first: "name [at] example [dot] org", "name(at)example.org",
// "name AT example DOT org", HTML entities and mailto: links. Addresses are
// lower-cased; every address found is returned, in order.
type emailProc struct{}

func init() {
	registerProc(procSpec{
		name:    "email",
		group:   groupTyped,
		summary: "Every email address in each value, lower-cased, after undoing obfuscation such as 'name [at] example [dot] org' and mailto: links. No parameters.",
		doc:     "The obfuscations undone: `name [at] example [dot] org`, `name(at)example.org`, `NAME AT example DOT org`, HTML entities, `mailto:` links.",
	}, func(noParameters) (Processor, error) { return emailProc{}, nil })
}

var (
	emailRe = regexp.MustCompile(`(?i)[a-z0-9][a-z0-9._%+\-]{0,63}@[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?)*\.[a-z]{2,24}`)
	// bracketed or spaced forms of "at" and "dot"
	obfAt  = regexp.MustCompile(`(?i)\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|\s+at\s+|\s+@\s+|\[@\]|\(@\))\s*`)
	obfDot = regexp.MustCompile(`(?i)\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|<\s*dot\s*>|\s+dot\s+|\[\.\]|\(\.\))\s*`)
	// an obfuscated address as a whole, so plain prose ("look at this")
	// is left alone
	obfWhole = regexp.MustCompile(`(?i)[a-z0-9._%+\-]+(?:\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|\[@\]|\(@\))\s*|\s+at\s+|\s+@\s+)[a-z0-9\-]+(?:(?:\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|<\s*dot\s*>|\[\.\]|\(\.\))\s*|\s+dot\s+|\.)[a-z0-9\-]+)+`)
)

// deobfuscate rewrites obfuscated addresses in s into plain ones.
func deobfuscate(s string) string {
	if strings.Contains(s, "&") {
		s = html.UnescapeString(s)
	}
	if !mayBeObfuscated(s) {
		return s
	}
	return obfWhole.ReplaceAllStringFunc(s, func(m string) string {
		m = obfAt.ReplaceAllString(m, "@")
		return obfDot.ReplaceAllString(m, ".")
	})
}

// mayBeObfuscated reports whether s has what every match of obfWhole has:
// "at" in any case, or an '@' after whitespace or an opening bracket. Most
// values have neither, and the test spares them the regular expression.
func mayBeObfuscated(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 'a', 'A':
			if i+1 < len(s) && (s[i+1] == 't' || s[i+1] == 'T') {
				return true
			}
		case '@':
			if i > 0 && strings.IndexByte("[( \t\n\f\r", s[i-1]) >= 0 {
				return true
			}
		}
	}
	return false
}

// findEmails returns the addresses in s, lower-cased, in order.
func findEmails(s string) []string {
	s = deobfuscate(s)
	var out []string
	for _, m := range emailRe.FindAllString(s, -1) {
		out = append(out, strings.ToLower(strings.TrimRight(m, ".")))
	}
	return out
}

// parseEmail reads s as exactly one email address.
func parseEmail(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) > 7 && strings.EqualFold(s[:7], "mailto:") {
		s = s[7:]
		if i := strings.IndexByte(s, '?'); i >= 0 {
			s = s[:i]
		}
	}
	s = deobfuscate(s)
	m := emailRe.FindString(s)
	if m == "" || len(m) != len(strings.TrimSpace(s)) {
		return "", false
	}
	return strings.ToLower(m), true
}

func (emailProc) Process(in []Value, _ *Document) ([]Value, error) {
	var out []Value
	for _, v := range in {
		for _, e := range findEmails(v.Text) {
			out = append(out, Value{Text: e})
		}
	}
	return out, nil
}
