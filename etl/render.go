package etl

import (
	"fmt"
	"strings"
)

// What a mapping says about rendering its pages in a browser: whether they
// need one (render) and which kinds of resource the browser may fetch for
// them beyond the page, its scripts and the data they ask for
// (render_resources).

// RenderMode says when a mapping's pages are rendered.
type RenderMode uint8

const (
	// RenderAuto renders a page only when its HTML looks written by
	// JavaScript (see JSOnly) and no mapping that matches it filled what a
	// record still needs from that HTML. The default.
	RenderAuto RenderMode = iota
	// RenderAlways sends the mapping's pages to a browser straight away,
	// without fetching their HTML first. `"render": true` means this.
	RenderAlways
	// RenderNever keeps the mapping's pages as their HTML is, whatever it
	// looks like.
	RenderNever
)

// renderModes are the names of the modes in mapping files, by value.
var renderModes = [...]string{RenderAuto: "auto", RenderAlways: "always", RenderNever: "never"}

func (m RenderMode) String() string {
	if int(m) < len(renderModes) {
		return renderModes[m]
	}
	return fmt.Sprintf("RenderMode(%d)", m)
}

// Resource kinds a mapping may let the browser fetch for its pages
// (render_resources). Scripts and the requests scripts make (XHR, fetch)
// are always allowed; every other kind is refused without a request unless
// a mapping that matches the page lists it. Append only: mapping files
// name them.
const (
	ResourceStylesheet = "stylesheet"
	ResourceImage      = "image"
	ResourceFont       = "font"
	ResourceMedia      = "media" // audio and video
	ResourceFrame      = "frame" // the documents of iframes
)

// RenderResourceKinds lists every kind render_resources accepts.
var RenderResourceKinds = []string{ResourceStylesheet, ResourceImage, ResourceFont, ResourceMedia, ResourceFrame}

// decodeRender reads the render key: "auto", "always" or "never", or a
// boolean as older mapping files have it (true is always, false auto).
func (l *fileLoader) decodeRender(n *jnode, ptr string) RenderMode {
	switch n.kind {
	case 'b':
		if n.b {
			return RenderAlways
		}
		return RenderAuto
	case 's':
		for m, name := range renderModes {
			if n.str == name {
				return RenderMode(m)
			}
		}
		l.fail(n, ptr, "render", `unknown render mode %q (want "auto", "always" or "never")`, n.str)
	default:
		l.fail(n, ptr, "render", `want "auto", "always" or "never", got %s`, n.kindName())
	}
	return RenderAuto
}

// decodeRenderResources reads render_resources: an array of resource kinds.
func (l *fileLoader) decodeRenderResources(n *jnode, ptr string) []string {
	var out []string
	for i, e := range l.array(n, ptr, "render_resources") {
		s, ok := l.str(e, fmt.Sprintf("%s/%d", ptr, i), "render_resources")
		if !ok {
			continue
		}
		if !contains(RenderResourceKinds, s) {
			hint := ""
			if c := closest(s, RenderResourceKinds); c != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", c)
			}
			l.fail(e, fmt.Sprintf("%s/%d", ptr, i), "render_resources", "unknown resource kind %q%s; want one of %s",
				s, hint, strings.Join(RenderResourceKinds, ", "))
			continue
		}
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// NeedsRender reports whether a mapping whose render is always matches
// rawURL: its pages go to a browser without their HTML being fetched
// first.
func (s *Set) NeedsRender(rawURL string) bool {
	for _, m := range s.Mappings() {
		if m.Render == RenderAlways && m.MatchURL(rawURL) {
			return true
		}
	}
	return false
}

// RenderResources lists the resource kinds that the mappings which run on
// rawURL allow the browser to fetch for it (see RenderResourceKinds), in
// the order of RenderResourceKinds; nil when none.
func (s *Set) RenderResources(rawURL string) []string {
	var want map[string]bool
	for _, m := range s.Mappings() {
		if len(m.RenderResources) == 0 || !m.MatchURL(rawURL) {
			continue
		}
		if want == nil {
			want = make(map[string]bool, len(RenderResourceKinds))
		}
		for _, k := range m.RenderResources {
			want[k] = true
		}
	}
	var out []string
	for _, k := range RenderResourceKinds {
		if want[k] {
			out = append(out, k)
		}
	}
	return out
}
