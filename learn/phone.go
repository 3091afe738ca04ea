package learn

import (
	"regexp"
	"strings"
)

// Phone numbers are compared as what they dial: their digits, and a
// leading + (an international number is not the same digits without
// it). "0161 496 0201" is "(0161) 496-0201"; "+39 02 555 0102" is not
// "39 02 555 0102". A rule must still take the page's own text, + and
// all (induce.go): the mapping declares no type that would rewrite it.

// Bounds of a phone number's digits (E.164 allows 15).
const (
	minPhoneDigits = 7
	maxPhoneDigits = 15
)

// phoneText is what a phone number is written with.
var phoneText = regexp.MustCompile(`^(?:tel:)?\+?[\d\s().\-/\x{00a0}]+$`)

// phoneKey is the digits of v with its leading +, "" when v is not a
// phone number.
func phoneKey(v string) string {
	v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "tel:"))
	if !phoneText.MatchString(v) {
		return ""
	}
	var b strings.Builder
	if strings.HasPrefix(v, "+") {
		b.WriteByte('+')
	}
	for _, r := range v {
		if '0' <= r && r <= '9' {
			b.WriteRune(r)
		}
	}
	if n := b.Len() - strings.Count(b.String(), "+"); n < minPhoneDigits || n > maxPhoneDigits {
		return ""
	}
	return b.String()
}

// isPhone reports whether every value is a phone number and some are
// written as only phone numbers are: with a +, a leading 0, parentheses
// or dashes ("12 345 678" may be a number; "0161 496 0201" is not).
func isPhone(values []string) bool {
	marked := false
	for _, v := range values {
		v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "tel:"))
		if phoneKey(v) == "" {
			return false
		}
		marked = marked || strings.HasPrefix(v, "+") || strings.HasPrefix(v, "0") || strings.ContainsAny(v, "()-")
	}
	return marked
}

// phoneSep is what may stand between two digits of a phone number on a
// page.
const phoneSep = `[\s().\-/\x{00a0}]{0,3}`

// phoneFinder matches the number v written with any separators between
// its digits, an opening parenthesis before it and its + when it has
// one; not inside a longer run of digits.
func phoneFinder(v string) *finder {
	key := phoneKey(v)
	if key == "" {
		return &finder{}
	}
	var b strings.Builder
	digits := strings.TrimPrefix(key, "+")
	if digits != key {
		b.WriteString(`\+\s*`)
	} else {
		b.WriteString(`\(?`)
	}
	for i, r := range digits {
		if i > 0 {
			b.WriteString(phoneSep)
		}
		b.WriteRune(r)
	}
	f := groupFinder(`(?:^|[^\d+])`, b.String(), `(?:[^\d]|$)`)
	f.digits = digits
	return f
}
