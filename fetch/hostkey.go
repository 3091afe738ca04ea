package fetch

import (
	"net/url"
	"strings"
)

// HostKey is the name a host's politeness is kept under — its delay, its
// last-crawl time in the store's host cache: the URL's host in lower
// case, with its port unless it is the scheme's default. Every component
// that asks a host for pages and shares its last-crawl times names hosts
// this way, so that one waits for the other.
func HostKey(u *url.URL) string {
	h := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		h = strings.TrimSuffix(h, ":"+p)
	}
	return h
}
