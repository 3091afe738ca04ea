package etl

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"net/url"
	"strings"
	"unsafe"

	"backfill/hostname"
)

// MaxURLLength is the longest URL the project accepts.
const MaxURLLength = 2048

// MaxOutLinks caps the outbound links taken from one page, so a page of a
// million anchors costs no more than a normal one.
const MaxOutLinks = 5000

// ErrBadURL classifies URLs NormalizeURL refuses.
var ErrBadURL = errors.New("bad url")

// NormalizeURL is the one URL normalization the project uses, so that the
// seen-URL store, the frontier and the extraction agree on what "the same
// URL" is: the scheme is lower-cased, the host put in its ASCII form
// (package hostname: lower case, punycode for Unicode labels, so that a
// host spelt either way is one host), a default port is dropped,
// the fragment is dropped, dot segments are resolved, an empty path becomes
// "/", and the query is kept as it is. Only absolute http and https URLs of
// at most MaxURLLength bytes are accepted.
func NormalizeURL(raw string) (string, error) {
	if len(raw) > MaxURLLength {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadURL, MaxURLLength)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return normalizeParsed(u)
}

func normalizeParsed(u *url.URL) (string, error) {
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return "", fmt.Errorf("%w: not absolute", ErrBadURL)
		}
		return "", fmt.Errorf("%w: scheme %q is not http or https", ErrBadURL, u.Scheme)
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	}
	host := u.Hostname()
	switch {
	case host == "":
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	case strings.ContainsAny(host, "[]"): // brackets belong around an IPv6 literal only
		return "", fmt.Errorf("%w: host %q", ErrBadURL, host)
	}
	host, err := hostname.ASCII(host)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port) // bracketing an IPv6 literal
	case strings.Contains(host, ":"): // IPv6 literal
		host = "[" + host + "]"
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	p = removeDotSegments(p)
	np, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	u.Path, u.RawPath = np, p
	s := u.String()
	if len(s) > MaxURLLength {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadURL, MaxURLLength)
	}
	return s, nil
}

// removeDotSegments implements RFC 3986 section 5.2.4 on an escaped path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// cleanHref removes what browsers ignore in an href: surrounding white
// space and tabs or newlines inside it.
func cleanHref(s string) string {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

// resolveURL makes href absolute against base and normalizes it.
func resolveURL(base *url.URL, href string) (string, error) {
	href = cleanHref(href)
	if href == "" {
		return "", fmt.Errorf("%w: empty", ErrBadURL)
	}
	if len(href) > MaxURLLength {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadURL, MaxURLLength)
	}
	var u *url.URL
	var err error
	if base != nil {
		u, err = base.Parse(href)
	} else {
		u, err = url.Parse(href)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return normalizeParsed(u)
}

// binaryExt lists file extensions whose links lead to content the ETL
// cannot read; they are not worth a fetch.
var binaryExt = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`
		pdf ps eps
		jpg jpeg png gif webp svg bmp ico tif tiff avif heic heif psd raw
		mp4 m4v webm avi mov mkv wmv flv mpg mpeg 3gp ogv
		mp3 wav ogg oga flac m4a aac opus wma mid midi
		zip tar gz tgz bz2 xz 7z rar zst lz lzma cab
		exe msi dmg pkg apk deb rpm iso img bin jar dll so
		doc docx xls xlsx ppt pptx odt ods odp rtf
		woff woff2 ttf otf eot`) {
		binaryExt[e] = true
	}
}

// IsBinaryURL reports whether a URL's path ends in a binary file type.
func IsBinaryURL(u string) bool {
	// The path ends at the query or fragment.
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u = u[:i]
	}
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	i := -1
	switch {
	case strings.HasPrefix(u, "https://"):
		i = len("https")
	case strings.HasPrefix(u, "http://"):
		i = len("http")
	default:
		i = strings.Index(u, "://")
	}
	if i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		} else {
			return false
		}
	}
	return binaryPath(u)
}

// binaryPath reports whether path (a URL path, or a URL's text up to the
// end of its path) ends in a binary file type: the extension is after the
// last dot of the last segment.
func binaryPath(u string) bool {
	dot := -1
	for i := len(u) - 1; i >= 0 && u[i] != '/'; i-- {
		if u[i] == '.' {
			dot = i
			break
		}
	}
	if dot < 0 || len(u)-dot-1 > maxBinaryExt {
		return false
	}
	var low [maxBinaryExt]byte
	ext := low[:0]
	for i := dot + 1; i < len(u); i++ {
		c := u[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		ext = append(ext, c)
	}
	return len(ext) > 0 && binaryExt[string(ext)]
}

// maxBinaryExt is the length of binaryExt's longest extension.
const maxBinaryExt = 5

// outLinks collects every http(s) a/area href on the page. Pages repeat
// links (menus, "read more"), so raw hrefs that need the comparatively
// costly general resolution are deduplicated before it.
func outLinks(doc *Document) []string {
	doc.scan()
	out := make([]string, 0, min(len(doc.hrefs), MaxOutLinks))
	seenRaw, seen := doc.linkSets()
	seen.reset(len(doc.hrefs))
	// Room for the root-relative links the fast path builds, in one
	// allocation.
	pre, _ := doc.rootPrefix()
	room := 0
	for _, h := range doc.hrefs {
		if len(h) > 0 && h[0] == '/' && (len(h) == 1 || h[1] != '/') {
			room += len(pre) + len(h)
		}
	}
	doc.reserve(room)
	for _, h := range doc.hrefs {
		if len(out) >= MaxOutLinks {
			break
		}
		u, pathEnd, ok := doc.fastResolvePath(h)
		if !ok {
			// The general resolution costs a parse: once per raw href.
			if !addNew(seenRaw, h) {
				continue
			}
			var err error
			if u, err = resolveURL(doc.Base, h); err != nil {
				continue
			}
			if seen.add(u) && !IsBinaryURL(u) {
				out = append(out, u)
			}
			continue
		}
		if seen.add(u) && !binaryPath(u[:pathEnd]) {
			out = append(out, u)
		}
	}
	return out
}

// addNew adds s to set and reports whether it was not there: one hash
// and probe where a lookup then an insert take two.
func addNew(set map[string]struct{}, s string) bool {
	n := len(set)
	set[s] = struct{}{}
	return len(set) > n
}

// stringSet is the set outLinks deduplicates resolved links with: open
// addressing over the strings' hashes, in a table sized once for the
// page's links, costs a fraction of a map insert per link. It is kept with
// the arena.
type stringSet struct {
	seed  maphash.Seed
	slots []setSlot
}

type setSlot struct {
	h uint64
	s string // "" when the slot is free; the set holds no empty string
}

// reset empties the set and sizes it for up to n strings.
func (t *stringSet) reset(n int) {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if cap(t.slots) < size {
		t.slots = make([]setSlot, size)
		return
	}
	t.slots = t.slots[:size]
	clear(t.slots)
}

// add adds a non-empty x, at most n of them since reset(n), and reports
// whether it was not there yet.
func (t *stringSet) add(x string) bool {
	h := maphash.String(t.seed, x)
	mask := uint64(len(t.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		e := &t.slots[j]
		if e.s == "" {
			e.h, e.s = h, x
			return true
		}
		if e.h == h && e.s == x {
			return false
		}
	}
}

// resolve is resolveURL against the document's base. Most links on a page
// are plain root-relative or absolute http(s) URLs that normalization
// leaves as they are; those take a fast path that builds the result
// without parsing, everything else the general one. fastResolve is tested
// to agree with resolveURL (TestFastResolveAgrees, FuzzFastResolve).
func (d *Document) resolve(href string) (string, error) {
	if u, ok := d.fastResolve(href); ok {
		return u, nil
	}
	return resolveURL(d.Base, href)
}

func (d *Document) fastResolve(href string) (string, bool) {
	u, _, ok := d.fastResolvePath(href)
	return u, ok
}

// fastResolvePath is fastResolve that also says where the result's path
// ends (before its query).
func (d *Document) fastResolvePath(href string) (u string, pathEnd int, ok bool) {
	if d.Base == nil || len(href) == 0 || len(href) > MaxURLLength {
		return "", 0, false
	}
	var rest, prefix string
	abs := false
	switch {
	case href[0] == '/' && (len(href) == 1 || href[1] != '/'):
		pre, ok := d.rootPrefix()
		if !ok {
			return "", 0, false
		}
		prefix, rest = pre, href
	case strings.HasPrefix(href, "https://") || strings.HasPrefix(href, "http://"):
		i := strings.Index(href, "://") + 3
		j := i
		for j < len(href) && urlClass[href[j]]&uHost != 0 {
			j++
		}
		if j == i || (j < len(href) && href[j] != '/' && href[j] != '?' && href[j] != '#') {
			return "", 0, false // empty host, or a port, user info, upper case…
		}
		if punyLabel(href[i:j]) {
			return "", 0, false // an "xn--" label is checked by the general path
		}
		prefix, rest, abs = href[:j], href[j:], true
	default:
		return "", 0, false
	}
	// Path: unreserved characters only, no dot segments.
	k := 0
	for ; k < len(rest); k++ {
		c := rest[k]
		if urlClass[c]&uPlain != 0 {
			continue
		}
		if c == '?' || c == '#' {
			break
		}
		if c != '.' || k > 0 && rest[k-1] == '/' {
			return "", 0, false
		}
	}
	// Query, kept as it is; fragment, dropped.
	q := k
	if q < len(rest) && rest[q] == '?' {
		for q++; q < len(rest) && rest[q] != '#'; q++ {
			if urlClass[rest[q]]&uQuery == 0 {
				return "", 0, false
			}
		}
	}
	for f := q + 1; f < len(rest); f++ {
		if urlClass[rest[f]]&uQuery == 0 && rest[f] != '#' {
			return "", 0, false
		}
	}
	slash := ""
	if rest == "" || rest[0] != '/' {
		slash = "/" // "http://host", "http://host?q": the path is "/"
	}
	if len(prefix)+len(slash)+q > MaxURLLength {
		return "", 0, false
	}
	pathEnd = len(prefix) + len(slash) + k
	if abs && slash == "" {
		// An absolute URL already in normal form: itself, without its
		// fragment.
		return href[:len(prefix)+q], pathEnd, true
	}
	return d.concat(prefix, slash, rest[:q]), pathEnd, true
}

// punyLabel reports whether host has a label starting "xn--".
func punyLabel(host string) bool {
	for i := 0; i+4 <= len(host); i++ {
		if (i == 0 || host[i-1] == '.') && host[i:i+4] == "xn--" {
			return true
		}
	}
	return false
}

// rootPrefix is the normalized scheme://host of the base that
// root-relative links resolve against, computed once per document.
func (d *Document) rootPrefix() (string, bool) {
	if d.prefixOK == 0 && d.Base != nil {
		d.prefixOK = -1
		c := *d.Base
		c.Path, c.RawPath, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "/", "", "", false, "", ""
		if s, err := normalizeParsed(&c); err == nil && strings.HasSuffix(s, "/") {
			d.prefix, d.prefixOK = strings.TrimSuffix(s, "/"), 1
		}
	}
	return d.prefix, d.prefixOK > 0
}

// reserve makes room for n bytes of concat's strings.
func (d *Document) reserve(n int) {
	if cap(d.strs)-len(d.strs) < n {
		d.strs = make([]byte, 0, n)
	}
}

// concat returns x+y+z carved from one buffer per document: a page
// resolves hundreds of links, and one allocation serves them all. A byte
// of the buffer is written once and never again (a full buffer is
// replaced, not reused), so each string stays valid, as strings.Builder's
// do; the builder's checks cost more than the copies here.
func (d *Document) concat(x, y, z string) string {
	n := len(x) + len(y) + len(z)
	if n == 0 {
		return ""
	}
	if cap(d.strs)-len(d.strs) < n {
		d.strs = make([]byte, 0, max(8<<10, n))
	}
	start := len(d.strs)
	d.strs = append(d.strs, x...)
	if y != "" {
		d.strs = append(d.strs, y...)
	}
	d.strs = append(d.strs, z...)
	return unsafe.String(&d.strs[start], n)
}

// Byte classes of the fast resolver, one table load per byte.
const (
	uHost  = 1 << iota // a host byte kept as it is: lower case, digit, '-', '.'
	uQuery             // a query byte normalization keeps as it is
	uPlain             // a path byte other than '.'
)

var urlClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		lowerDigit := 'a' <= b && b <= 'z' || '0' <= b && b <= '9'
		if lowerDigit || b == '-' || b == '.' {
			t[c] |= uHost
		}
		if lowerDigit || 'A' <= b && b <= 'Z' || strings.IndexByte("-_.~/", b) >= 0 {
			t[c] |= uQuery
			if b != '.' {
				t[c] |= uPlain
			}
		}
		if strings.IndexByte("!$&'()*+,;=:@?", b) >= 0 {
			t[c] |= uQuery
		}
	}
	return t
}()
