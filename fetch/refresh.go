package fetch

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"
)

// A page that says <meta http-equiv="refresh" content="0; url=/next"> (or
// sends a Refresh header) is a redirect in all but name. Get follows it like
// one, within the same hop limit and loop check, when its delay is short
// enough that a reader would be taken there.

// refreshScan bounds how much of a page is searched for a meta refresh.
const refreshScan = 64 << 10

// refreshTarget returns where resp refreshes to, or nil.
func (f *Fetcher) refreshTarget(resp *Response, u *url.URL) *url.URL {
	content := resp.Header.Get("Refresh")
	if content == "" && isHTMLType(resp.ContentType) {
		content = metaRefresh(resp.Body)
	}
	if content == "" {
		return nil
	}
	delay, target, ok := parseRefresh(content)
	if !ok || target == "" || delay > f.cfg.MaxRefreshWait {
		return nil
	}
	next, err := u.Parse(target)
	if err != nil {
		return nil
	}
	next, err = parseTarget(next.String())
	if err != nil || next.String() == u.String() {
		return nil // a page that reloads itself is just a page
	}
	return next
}

// metaRefresh returns the content of the first <meta http-equiv=refresh>.
func metaRefresh(b []byte) string {
	if len(b) > refreshScan {
		b = b[:refreshScan]
	}
	if !containsFold(b, "refresh") {
		return "" // most pages: skip the tokenizer
	}
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if string(name) != "meta" {
				continue
			}
			var equiv, content string
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "http-equiv":
					equiv = strings.ToLower(strings.TrimSpace(string(v)))
				case "content":
					content = string(v)
				}
			}
			if equiv == "refresh" && content != "" {
				return content
			}
		}
	}
}

// parseRefresh reads "5; url=/next", "0;URL='x'", "3, x" or "7".
func parseRefresh(s string) (time.Duration, string, bool) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", false
	}
	secs, err := strconv.ParseFloat(strings.TrimSuffix(s[:i], "."), 64)
	if err != nil || secs < 0 || secs > 1e6 {
		return 0, "", false
	}
	delay := time.Duration(secs * float64(time.Second))
	rest := strings.TrimLeft(s[i:], " \t\r\n")
	if rest == "" {
		return delay, "", true
	}
	if rest[0] != ';' && rest[0] != ',' {
		return 0, "", false
	}
	rest = strings.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) >= 3 && strings.EqualFold(rest[:3], "url") {
		after := strings.TrimLeft(rest[3:], " \t\r\n")
		if strings.HasPrefix(after, "=") {
			rest = strings.TrimLeft(after[1:], " \t\r\n")
		}
	}
	if rest != "" && (rest[0] == '\'' || rest[0] == '"') {
		q := rest[0]
		rest = rest[1:]
		if j := strings.IndexByte(rest, q); j >= 0 {
			rest = rest[:j]
		}
	}
	return delay, strings.TrimSpace(rest), true
}

// containsFold reports whether b contains the lower-case ASCII word w in
// any case, without copying b.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if b[i]|0x20 != w[0] {
			continue
		}
		j := 1
		for j < len(w) && b[i+j]|0x20 == w[j] {
			j++
		}
		if j == len(w) {
			return true
		}
	}
	return false
}
