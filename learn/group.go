package learn

import (
	"net"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Teacher pages are grouped by host and by the shape of their path, and
// each group becomes one mapping whose url_patterns say which pages of
// the host it is for: /people/ada and /people/bob are one group
// (^https?://host/people/[^/?#]+$), /about another.

// shape is what groups page URLs: the host, the number of path segments,
// the first segment when there are several, and whether the path ends in
// a slash.
type shape struct {
	host  string
	segs  int
	first string
	slash bool
}

func segments(u *url.URL) []string {
	p := strings.Trim(u.EscapedPath(), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// hostShape is a host with every run of digits in its name written N:
// the hosts of one site numbered folk-0001.example, folk-0002.example…
// are one shape, folk-N.example, when their pages are. An address is
// not a name: 192.0.2.1 and 192.0.2.7 are two sites, and a port is kept
// as it is.
func hostShape(host string) string {
	host = strings.ToLower(host)
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, ":"+p
	}
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return host
	}
	var b strings.Builder
	digits := false
	for _, r := range name {
		d := '0' <= r && r <= '9'
		switch {
		case d && !digits:
			b.WriteByte('N')
		case !d:
			b.WriteRune(r)
		}
		digits = d
	}
	return b.String() + port
}

// hostPattern matches the hosts: literal when they are one, else their
// shared shape with any number where they number themselves.
func hostPattern(urls []*url.URL) string {
	host := strings.ToLower(urls[0].Host)
	same := true
	for _, u := range urls {
		same = same && strings.ToLower(u.Host) == host
	}
	if same {
		return regexp.QuoteMeta(host)
	}
	shape := hostShape(host)
	port := ""
	if h, p, err := net.SplitHostPort(shape); err == nil {
		shape, port = h, regexp.QuoteMeta(":"+p)
	}
	parts := strings.Split(shape, "N")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return strings.Join(parts, "[0-9]+") + port
}

func shapeOf(u *url.URL) shape {
	segs := segments(u)
	s := shape{host: hostShape(u.Host), segs: len(segs), slash: strings.HasSuffix(u.EscapedPath(), "/") && len(segs) > 0}
	if len(segs) > 1 {
		s.first = segs[0]
	}
	return s
}

// label names the shape inside its host, for mapping names: its first
// segment, "root" for the host's front page.
func (s shape) label() string {
	switch {
	case s.first != "":
		return s.first
	case s.segs == 0:
		return "root"
	}
	return "pages"
}

// urlPattern is a regular expression matching the URLs of one shape and
// pages like them: segments every URL shares stay literal, others (and
// always the last, which names the page, and any with a digit, which
// numbers it) match any segment, keeping a shared extension.
func urlPattern(urls []*url.URL) string {
	sort.Slice(urls, func(i, j int) bool { return urls[i].String() < urls[j].String() })
	host := hostPattern(urls)
	n := len(segments(urls[0]))
	var parts []string
	for i := 0; i < n; i++ {
		var vals []string
		for _, u := range urls {
			vals = append(vals, segments(u)[i])
		}
		same := true
		for _, v := range vals {
			same = same && v == vals[0]
		}
		if same && i < n-1 && !strings.ContainsAny(vals[0], "0123456789") {
			parts = append(parts, regexp.QuoteMeta(vals[0]))
			continue
		}
		ext := path.Ext(vals[0])
		for _, v := range vals {
			if path.Ext(v) != ext {
				ext = ""
			}
		}
		parts = append(parts, `[^/?#]+`+regexp.QuoteMeta(ext))
	}
	slashes := 0
	query := false
	for _, u := range urls {
		if strings.HasSuffix(u.EscapedPath(), "/") {
			slashes++
		}
		query = query || u.RawQuery != ""
	}
	p := "^https?://" + host + "/" + strings.Join(parts, "/")
	switch {
	case n == 0:
		p += "?"
	case slashes == len(urls):
		p += "/"
	case slashes > 0:
		p += "/?"
	}
	if query {
		p += `(?:\?.*)?`
	}
	return p + "$"
}
