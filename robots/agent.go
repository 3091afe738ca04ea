package robots

import "strings"

// DefaultToken is the product token of a User-Agent that does not start
// with one.
const DefaultToken = "backfill"

// ProductToken is the part of a User-Agent that robots.txt groups name: its
// leading run of letters, "_" and "-", the characters RFC 9309 allows in a
// product token. "backfill/1.0 (+https://backfill.example/bot)" gives
// "backfill".
func ProductToken(userAgent string) string {
	if tok := agentToken(strings.TrimSpace(userAgent)); tok != "" {
		return tok
	}
	return DefaultToken
}

// agentToken is the leading run of letters, "_" and "-" of s.
func agentToken(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-') {
			return s[:i]
		}
	}
	return s
}

// agentLine reports what a User-agent line's value names: every crawler
// ("*", alone or followed by space, as Google reads it), or the product
// token it starts with (cut at the first character a token may not hold,
// so "ExampleBot/2.1" names ExampleBot).
func agentLine(v string) (star bool, token string) {
	if v == "*" || strings.HasPrefix(v, "*") && isSpace(v[1]) {
		return true, ""
	}
	return false, agentToken(v)
}
