// Package hostname owns the one form a host name takes before it keys
// anything: the seen store and frontier (through etl.NormalizeURL), the
// routing of domains to supervisors, a host's delay and robots.txt
// (fetch.HostKey), and the blacklist. A host written in Unicode and the
// same host in punycode are one host to all of them, as they are to DNS
// and to the server.
//
// The form is UTS #46's ASCII one (golang.org/x/net/idna): each label
// mapped (case folded, full-width forms and other compatibility
// characters to their plain ones, ideographic full stops to dots), checked
// (normalization, joiners, the bidi rule) and, when not ASCII, written as
// "xn--" punycode, lower case. It is the profile web browsers use for a
// URL's host, not the strict one for registering a name: labels such as
// "r3---sn-abc" and names with "_", both in common use, are hosts like
// any other. A name of plain lower-case ASCII with no "xn--" label is its
// own form and skips the conversion, so the common case costs a scan.
//
//	h, err := hostname.ASCII("Bücher.Example") // "xn--bcher-kva.example"
package hostname

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// profile is UTS #46 lookup processing (non-transitional, so "ß" stays a
// letter of its own) without the hyphen and STD3 checks that browsers
// leave out too.
var profile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
)

// maxLabel is the longest label DNS carries.
const maxLabel = 63

// ErrInvalid classifies names ASCII refuses.
var ErrInvalid = errors.New("invalid host name")

// ASCII returns name in its ASCII form: lower case, every label that is
// not plain ASCII converted by UTS #46 to punycode, every "xn--" label
// checked to decode to a valid one. A trailing dot is kept. IP literals
// (IPv4 dotted, or an IPv6 address, with or without brackets) are
// returned lower-cased. A name that UTS #46 refuses (bad punycode, a
// disallowed character, a label breaking the bidi or joiner rules) is an
// error wrapping ErrInvalid and saying why.
func ASCII(name string) (string, error) {
	if plain, ok := plainASCII(name); ok {
		return plain, nil
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		// An IPv6 literal whose zone is not ASCII: no labels to convert,
		// and no interface is called that.
		return "", fmt.Errorf("%w %q: an address with a zone that is not ASCII", ErrInvalid, name)
	}
	// ASCII letters go to lower case first, as UTS #46 maps them: an
	// "XN--" label is then checked like an "xn--" one.
	a, err := profile.ToASCII(lowerASCII(name))
	if err != nil {
		return "", fmt.Errorf("%w %q: %v", ErrInvalid, name, err)
	}
	// A label that decodes to nothing ("xn--") leaves an empty label
	// behind, and one longer than DNS allows cannot be decoded back:
	// neither is a name any server answers to.
	for i, l := range strings.Split(a, ".") {
		switch {
		case l == "" && !(i > 0 && i == strings.Count(a, ".")):
			return "", fmt.Errorf("%w %q: empty label", ErrInvalid, name)
		case len(l) > maxLabel:
			return "", fmt.Errorf("%w %q: a label longer than %d bytes", ErrInvalid, name, maxLabel)
		}
	}
	return a, nil
}

// plainASCII lower-cases name when it is all ASCII without an "xn--"
// label, and reports whether it was: such a name is its own ASCII form
// (UTS #46 maps ASCII letters to lower case and leaves the rest of ASCII
// as it is), as it always was here.
func plainASCII(name string) (string, bool) {
	upper := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 0x80:
			return "", false
		case (c == 'x' || c == 'X') && (i == 0 || name[i-1] == '.') && hasPunyPrefix(name[i:]):
			return "", false
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	if upper {
		return strings.ToLower(name), true
	}
	return name, true
}

// lowerASCII maps the ASCII upper-case letters of s to lower case and
// leaves everything else to UTS #46.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// hasPunyPrefix reports whether s starts with "xn--" in any case.
func hasPunyPrefix(s string) bool {
	return len(s) >= 4 && (s[1] == 'n' || s[1] == 'N') && s[2] == '-' && s[3] == '-'
}
