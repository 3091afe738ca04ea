package fetch

import (
	"net/url"
	"strings"

	"backfill/hostname"
)

// HostKey is the name a host's politeness is kept under — its delay, its
// robots.txt and last-crawl time in the store's host cache: the URL's host
// in its ASCII form (package hostname: lower case, Unicode labels in
// punycode, so that both spellings of a host share one delay), with its
// port unless it is the scheme's default. Every component that asks a
// host for pages and shares its last-crawl times names hosts this way, so
// that one waits for the other. A host that has no ASCII form (which no
// request can reach: Get refuses it as ClassURL) keys as it is, in lower
// case.
func HostKey(u *url.URL) string {
	h := strings.ToLower(u.Hostname())
	if a, err := hostname.ASCII(u.Hostname()); err == nil {
		h = a
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" && !((u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443")) {
		h += ":" + p
	}
	return h
}
