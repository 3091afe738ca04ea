package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// mappingSet is the subset of the site-mapping format this contender needs
// to do the same extraction work as backfill: url_patterns pick the
// mappings that apply to a page, and each field's processor chain (xpath,
// jsonld, regex, replace, email, trim, lower, upper) runs on the page
// parsed once. A processor type it does not know is refused at load, so
// the comparison never silently does less work than backfill.
type mappingSet struct {
	mappings []*siteMapping
}

type siteMapping struct {
	name     string
	patterns []*regexp.Regexp
	fields   []*field
	parsers  []*field // url_parsers: chains whose values are links
}

type field struct {
	name  string
	steps []step
}

// step is one compiled processor. value is the text a step passes on;
// node, when set, is the context for a following xpath step.
type step func(in []value) []value

type value struct {
	text string
	node *html.Node
}

type rawMapping struct {
	Name        string `json:"name"`
	URLPatterns []struct {
		Type    string `json:"type"`
		Pattern string `json:"pattern"`
	} `json:"url_patterns"`
	URLParsers []rawChain `json:"url_parsers"`
	Fields     []rawChain `json:"fields"`
}

type rawChain struct {
	Name       string `json:"name"`
	Processors []struct {
		Type       string          `json:"type"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"processors"`
}

// loadMappings reads every mapping file in dir whose name matches glob.
func loadMappings(dir, glob string) (*mappingSet, error) {
	names, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		return nil, fmt.Errorf("mappings %s: %w", filepath.Join(dir, glob), err)
	}
	sort.Strings(names)
	set := &mappingSet{}
	for _, name := range names {
		if strings.HasSuffix(name, "schema.json") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("mappings: %w", err)
		}
		var raws []rawMapping
		trimmed := strings.TrimSpace(string(data))
		if strings.HasPrefix(trimmed, "[") {
			err = json.Unmarshal(data, &raws)
		} else {
			var one rawMapping
			err = json.Unmarshal(data, &one)
			raws = []rawMapping{one}
		}
		if err != nil {
			return nil, fmt.Errorf("mapping file %s: %w", name, err)
		}
		for _, r := range raws {
			m, err := compileMapping(r)
			if err != nil {
				return nil, fmt.Errorf("mapping file %s: %w", name, err)
			}
			set.mappings = append(set.mappings, m)
		}
	}
	if len(set.mappings) == 0 {
		return nil, fmt.Errorf("mappings: no file matches %s", filepath.Join(dir, glob))
	}
	return set, nil
}

func compileMapping(r rawMapping) (*siteMapping, error) {
	m := &siteMapping{name: r.Name}
	for i, p := range r.URLPatterns {
		if p.Type != "" && p.Type != "regex" {
			return nil, fmt.Errorf("mapping %s: url_patterns[%d]: type %q not supported", r.Name, i, p.Type)
		}
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: url_patterns[%d]: %w", r.Name, i, err)
		}
		m.patterns = append(m.patterns, re)
	}
	for i, c := range r.URLParsers {
		f, err := compileChain(c)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: url_parsers[%d]: %w", r.Name, i, err)
		}
		m.parsers = append(m.parsers, f)
	}
	for i, c := range r.Fields {
		f, err := compileChain(c)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: field %s (fields[%d]): %w", r.Name, c.Name, i, err)
		}
		m.fields = append(m.fields, f)
	}
	return m, nil
}

func compileChain(c rawChain) (*field, error) {
	f := &field{name: c.Name}
	for i, p := range c.Processors {
		s, err := compileStep(p.Type, p.Parameters)
		if err != nil {
			return nil, fmt.Errorf("processors[%d] (%s): %w", i, p.Type, err)
		}
		f.steps = append(f.steps, s)
	}
	return f, nil
}

func compileStep(kind string, raw json.RawMessage) (step, error) {
	var p struct {
		Type        json.RawMessage `json:"type"`
		Property    string          `json:"property"`
		Expression  string          `json:"expression"`
		First       bool            `json:"first"`
		Pattern     string          `json:"pattern"`
		Group       *int            `json:"group"`
		All         bool            `json:"all"`
		Replacement *string         `json:"replacement"`
		Cutset      string          `json:"cutset"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
	}
	switch kind {
	case "xpath":
		expr, err := xpath.Compile(p.Expression)
		if err != nil {
			return nil, fmt.Errorf("invalid XPath %q: %w", p.Expression, err)
		}
		pool := &sync.Pool{New: func() any { e, _ := xpath.Compile(p.Expression); return e }}
		pool.Put(expr)
		return xpathStep(pool, p.First), nil
	case "regex":
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return nil, err
		}
		g := 0
		if re.NumSubexp() > 0 {
			g = 1
		}
		if p.Group != nil {
			g = *p.Group
		}
		return func(in []value) []value {
			var out []value
			for _, v := range in {
				n := 1
				if p.All {
					n = -1
				}
				for _, m := range re.FindAllStringSubmatch(v.text, n) {
					if g < len(m) {
						out = append(out, value{text: m[g]})
					}
				}
			}
			return out
		}, nil
	case "replace":
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return nil, err
		}
		repl := ""
		if p.Replacement != nil {
			repl = *p.Replacement
		}
		return textStep(func(s string) string { return re.ReplaceAllString(s, repl) }), nil
	case "trim":
		if p.Cutset != "" {
			return textStep(func(s string) string { return strings.Trim(s, p.Cutset) }), nil
		}
		return textStep(collapseSpace), nil
	case "jsonld":
		var types []string
		if len(p.Type) > 0 {
			var one string
			if json.Unmarshal(p.Type, &one) == nil {
				types = []string{one}
			} else if err := json.Unmarshal(p.Type, &types); err != nil {
				return nil, fmt.Errorf("jsonld type: %w", err)
			}
		}
		var prop []string
		if p.Property != "" {
			prop = strings.Split(p.Property, ".")
		}
		return jsonldStep(types, prop), nil
	case "email":
		return func(in []value) []value {
			var out []value
			for _, v := range in {
				for _, e := range findEmails(v.text) {
					out = append(out, value{text: e})
				}
			}
			return out
		}, nil
	case "lower":
		return textStep(strings.ToLower), nil
	case "upper":
		return textStep(strings.ToUpper), nil
	}
	return nil, fmt.Errorf("processor type %q not supported by this contender", kind)
}

// xpathStep evaluates a compiled expression. An xpath.Expr carries
// iteration state, so concurrent callbacks each take their own from pool.
func xpathStep(pool *sync.Pool, first bool) step {
	return func(in []value) []value {
		expr := pool.Get().(*xpath.Expr)
		defer pool.Put(expr)
		var out []value
		for _, v := range in {
			ctx := v.node
			if ctx == nil {
				frag, err := html.Parse(strings.NewReader(v.text))
				if err != nil {
					continue
				}
				ctx = frag
			}
			switch r := expr.Evaluate(htmlquery.CreateXPathNavigator(ctx)).(type) {
			case *xpath.NodeIterator:
				for r.MoveNext() {
					nav, ok := r.Current().(*htmlquery.NodeNavigator)
					if !ok {
						continue
					}
					switch nav.NodeType() {
					case xpath.AttributeNode, xpath.TextNode, xpath.CommentNode:
						out = append(out, value{text: nav.Value()})
					default:
						out = append(out, value{text: htmlquery.InnerText(nav.Current()), node: nav.Current()})
					}
					if first {
						break
					}
				}
			case string:
				out = append(out, value{text: r})
			case float64:
				out = append(out, value{text: fmt.Sprint(r)})
			case bool:
				out = append(out, value{text: fmt.Sprint(r)})
			}
			if first && len(out) > 0 {
				return out[:1]
			}
		}
		return out
	}
}

func textStep(f func(string) string) step {
	return func(in []value) []value {
		out := make([]value, len(in))
		for i, v := range in {
			out[i] = value{text: f(v.text)}
		}
		return out
	}
}

func collapseSpace(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\u00a0' }), " ")
}

// extract runs every mapping whose url_patterns match pageURL on doc. It
// returns the first value of each field that yielded one (keyed
// "mapping/field") and the links the url_parsers found, as written on the
// page (the caller resolves them).
func (s *mappingSet) extract(pageURL string, doc *html.Node) (fields map[string]string, links []string) {
	for _, m := range s.mappings {
		if !m.matches(pageURL) {
			continue
		}
		for _, f := range m.parsers {
			for _, v := range f.run(doc) {
				links = append(links, v.text)
			}
		}
		for _, f := range m.fields {
			if vals := f.run(doc); len(vals) > 0 && vals[0].text != "" {
				if fields == nil {
					fields = map[string]string{}
				}
				fields[m.name+"/"+f.name] = vals[0].text
			}
		}
	}
	return fields, links
}

func (f *field) run(doc *html.Node) []value {
	vals := []value{{node: doc}}
	for _, st := range f.steps {
		if vals = st(vals); len(vals) == 0 {
			break
		}
	}
	return vals
}

func (m *siteMapping) matches(u string) bool {
	if len(m.patterns) == 0 {
		return true
	}
	for _, p := range m.patterns {
		if p.MatchString(u) {
			return true
		}
	}
	return false
}

// jsonldStep reads the page's <script type="application/ld+json"> blocks
// (parsed once per page, kept on the document node's value), keeps the
// objects of types (nested ones too, and those of an @graph) and takes
// prop of each, as backfill's jsonld processor does.
func jsonldStep(types, prop []string) step {
	return func(in []value) []value {
		var out []value
		for _, v := range in {
			if v.node == nil {
				continue
			}
			for _, root := range ldBlocks(v.node) {
				var objs []map[string]any
				collectLD(root, types, &objs, 0)
				for _, o := range objs {
					var cur any = o
					for _, seg := range prop {
						cur = ldGet(cur, seg)
					}
					out = appendLD(out, cur)
				}
			}
		}
		return out
	}
}

// ldBlocks parses the JSON-LD blocks under n.
func ldBlocks(n *html.Node) []any {
	var out []any
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "script" {
			for _, a := range n.Attr {
				if a.Key == "type" && strings.EqualFold(strings.TrimSpace(a.Val), "application/ld+json") && n.FirstChild != nil {
					var v any
					if json.Unmarshal([]byte(n.FirstChild.Data), &v) == nil {
						out = append(out, v)
					}
				}
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func collectLD(v any, types []string, out *[]map[string]any, depth int) {
	if depth > 32 {
		return
	}
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			collectLD(e, types, out, depth+1)
		}
	case map[string]any:
		if ldIsType(t["@type"], types) {
			*out = append(*out, t)
		}
		for k, e := range t {
			if k != "@type" && k != "@context" {
				collectLD(e, types, out, depth+1)
			}
		}
	}
}

func ldIsType(v any, types []string) bool {
	if len(types) == 0 {
		return v != nil
	}
	switch t := v.(type) {
	case string:
		return slices.Contains(types, strings.TrimPrefix(t, "schema:"))
	case []any:
		for _, e := range t {
			if ldIsType(e, types) {
				return true
			}
		}
	}
	return false
}

func ldGet(v any, key string) any {
	if a, ok := v.([]any); ok && len(a) > 0 {
		v = a[0]
	}
	if m, ok := v.(map[string]any); ok {
		return m[key]
	}
	return nil
}

func appendLD(out []value, v any) []value {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			out = appendLD(out, e)
		}
	case string:
		out = append(out, value{text: t})
	case float64, bool:
		out = append(out, value{text: fmt.Sprint(t)})
	case map[string]any:
		if x, ok := t["@value"]; ok {
			out = appendLD(out, x)
		} else if x, ok := t["@id"]; ok {
			out = appendLD(out, x)
		}
	}
	return out
}

var (
	emailRe  = regexp.MustCompile(`(?i)[a-z0-9][a-z0-9._%+\-]{0,63}@[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?)*\.[a-z]{2,24}`)
	obfAt    = regexp.MustCompile(`(?i)\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|\s+at\s+|\s+@\s+|\[@\]|\(@\))\s*`)
	obfDot   = regexp.MustCompile(`(?i)\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|<\s*dot\s*>|\s+dot\s+|\[\.\]|\(\.\))\s*`)
	obfWhole = regexp.MustCompile(`(?i)[a-z0-9._%+\-]+(?:\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|\[@\]|\(@\))\s*|\s+at\s+|\s+@\s+)[a-z0-9\-]+(?:(?:\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|<\s*dot\s*>|\[\.\]|\(\.\))\s*|\s+dot\s+|\.)[a-z0-9\-]+)+`)
)

// findEmails undoes the usual obfuscations ("name [at] host [dot] org")
// and returns the addresses in s, lower-cased, as backfill's email
// processor does.
func findEmails(s string) []string {
	s = html.UnescapeString(s)
	s = obfWhole.ReplaceAllStringFunc(s, func(m string) string {
		return obfDot.ReplaceAllString(obfAt.ReplaceAllString(m, "@"), ".")
	})
	var out []string
	for _, m := range emailRe.FindAllString(s, -1) {
		out = append(out, strings.ToLower(strings.TrimRight(m, ".")))
	}
	return out
}
