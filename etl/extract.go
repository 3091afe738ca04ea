package etl

import (
	"fmt"
	"runtime/debug"
	"strings"
	"unsafe"
)

// Extract parses body once (HTML, or JSON when contentType says so) and runs
// every mapping whose url_patterns match pageURL on the same tree. Links are
// resolved against pageURL. It never panics on any input. body is only
// read, during the call: the Extraction shares no memory with it.
func (s *Set) Extract(pageURL string, body []byte, contentType string) *Extraction {
	return s.extract(pageURL, body, contentType, extractOpts{})
}

// ExtractWithFingerprint is Extract that also fingerprints the page's
// text (Extraction.Fingerprint) on the tree it parsed, for the crawl's
// content-seen test. Fingerprinting costs CPU on every page, so it is
// asked for only when the test is on.
func (s *Set) ExtractWithFingerprint(pageURL string, body []byte, contentType string) *Extraction {
	return s.extract(pageURL, body, contentType, extractOpts{fingerprint: true})
}

// extractOpts are the variations of one extraction.
type extractOpts struct {
	tr   tracer // sees every step, for `mappings try`
	only string // run only the mapping of this name
	// fingerprint fills Extraction.Fingerprint (content-seen).
	fingerprint bool
}

// tracer receives every step of every chain, for `mappings try`.
type tracer func(m *Mapping, r *rule, st *step, in, out []Value, err error)

func (s *Set) extract(pageURL string, body []byte, contentType string, o extractOpts) (ex *Extraction) {
	ex = &Extraction{}
	var doc *Document
	defer func() {
		// Last line of defence: the per-mapping recover below should catch
		// everything, but Extract promises never to panic.
		if r := recover(); r != nil {
			ex.Errors = append(ex.Errors, FieldError{Field: "(page)", Err: fmt.Sprintf("internal error: %v", r)})
		}
		if doc != nil && doc.shared {
			doc.detach(ex, body)
		}
	}()
	if o.tr == nil && len(body) > 0 {
		// The tree's strings share body's memory for the length of the
		// call, sparing a copy of the page (and the collections it would
		// cause); detach copies out what the extraction returns. A trace
		// hands values to the tracer as they are made, so it takes a copy.
		doc = newDocument(pageURL, unsafe.String(&body[0], len(body)), body, contentType, s.plan, s.parser)
		doc.shared = true
	} else {
		doc = newDocument(pageURL, string(body), body, contentType, s.plan, s.parser)
	}
	// Nothing of the tree outlives extract: the values and links it
	// returns are strings.
	defer doc.release()
	if o.fingerprint {
		// As PageFingerprint does, on the tree already parsed.
		if doc.Root != nil {
			ex.Fingerprint = HTMLFingerprint(doc.Root)
		} else {
			ex.Fingerprint = bodyFingerprint(doc.Body)
		}
	}
	// jsCheck: a rendering could add a field here (see Extraction.JSOnly).
	follow, jsCheck := true, false
	var links []string
	for _, m := range s.Mappings() {
		if o.only != "" && m.Name != o.only {
			continue
		}
		if !m.MatchURL(pageURL) {
			continue
		}
		nFields, nLinks, nErrs := len(ex.Fields), len(links), len(ex.Errors)
		links = runMapping(m, doc, ex, links, o)
		produced := len(ex.Fields) > nFields || len(links) > nLinks || len(ex.Errors) > nErrs
		if !m.Generic() || produced {
			ex.Mappings = append(ex.Mappings, m.Name)
		}
		if !m.Generic() && !m.Follow {
			follow = false
		}
		jsCheck = jsCheck || !m.Generic() && m.Render == RenderAuto && len(ex.Fields)-nFields < len(m.fields)
	}
	if jsCheck {
		ex.JSOnly = JSOnly(doc.Root)
	}
	ex.Links = dedupe(links)
	if follow && doc.Root != nil {
		ex.OutLinks, ex.Anchors = outLinks(doc)
	}
	return ex
}

// runMapping runs one mapping's url_parsers and fields, turning any panic
// into a FieldError so one broken mapping cannot spoil the page for others.
func runMapping(m *Mapping, doc *Document, ex *Extraction, links []string, o extractOpts) (out []string) {
	out = links
	current := "(mapping)"
	defer func() {
		if r := recover(); r != nil {
			ex.Errors = append(ex.Errors, FieldError{Mapping: m.Name, Field: current,
				Err: fmt.Sprintf("internal error: %v\n%s", r, firstFrames(debug.Stack()))})
		}
	}()
	if doc.parseErr != nil && (len(m.parsers) > 0 || len(m.fields) > 0) {
		ex.Errors = append(ex.Errors, FieldError{Mapping: m.Name, Field: "(document)", Err: "document did not parse: " + doc.parseErr.Error()})
		return out
	}
	for _, r := range m.parsers {
		current = r.label
		vals, ferr := runChain(m, r, doc, o.tr)
		if ferr != nil {
			ex.Errors = append(ex.Errors, *ferr)
			continue
		}
		for _, v := range vals {
			if u, err := doc.resolve(v.Text); err == nil {
				out = append(out, u)
			}
		}
	}
	for _, r := range m.fields {
		current = r.name
		vals, ferr := runChain(m, r, doc, o.tr)
		if ferr != nil {
			ex.Errors = append(ex.Errors, *ferr)
			continue
		}
		final, errs := finishField(m, r, doc, vals)
		ex.Errors = append(ex.Errors, errs...)
		if len(final) > 0 {
			ex.Fields = append(ex.Fields, FieldValues{Mapping: m.Name, Field: r.name, Values: final, Match: r.match})
		}
	}
	return out
}

// runChain feeds the document through the rule's processors.
func runChain(m *Mapping, r *rule, doc *Document, tr tracer) ([]Value, *FieldError) {
	vals := doc.docValue()
	for i := range r.steps {
		st := &r.steps[i]
		out, err := st.proc.Process(vals, doc)
		if tr != nil {
			tr(m, r, st, vals, out, err)
		}
		if err != nil {
			field := r.name
			if field == "" || strings.HasPrefix(r.label, "url_parsers") {
				field = r.label
			}
			return nil, &FieldError{Mapping: m.Name, Field: field, Processor: st.label, Err: err.Error()}
		}
		vals = out
	}
	return vals, nil
}

// finishField applies the field's type, validation and cardinality to the
// chain's output: empty values go, typed values are normalized, values that
// fail are dropped with the reason recorded, and unless the field takes all
// values only the first survivor is kept.
func finishField(m *Mapping, r *rule, doc *Document, vals []Value) ([]string, []FieldError) {
	var out []string
	var errs []FieldError
	for _, v := range vals {
		s := strings.TrimSpace(v.Text)
		if s == "" {
			continue
		}
		conv, err := convertType(r.typ, s, doc)
		if err != nil {
			errs = append(errs, FieldError{Mapping: m.Name, Field: r.name, Processor: "type " + r.typ, Err: err.Error()})
			continue
		}
		if r.validate != nil && !r.validate.MatchString(conv) {
			errs = append(errs, FieldError{Mapping: m.Name, Field: r.name, Processor: "validate",
				Err: fmt.Sprintf("value %q does not match %q, dropped", clip(conv, 80), r.validate.String())})
			continue
		}
		out = append(out, conv)
		if !r.all {
			break
		}
	}
	if r.all {
		out = dedupe(out)
	}
	return out, errs
}

// convertType reads s as the field's declared type.
func convertType(typ, s string, doc *Document) (string, error) {
	switch typ {
	case "", TypeString, TypeList:
		return s, nil
	case TypeURL:
		return doc.resolve(s)
	case TypeEmail:
		e, ok := parseEmail(s)
		if !ok {
			return "", fmt.Errorf("%q is not an email address", clip(s, 80))
		}
		return e, nil
	case TypeNumber:
		n, ok := parseNumber(s, "")
		if !ok {
			return "", fmt.Errorf("%q is not a number", clip(s, 80))
		}
		return n, nil
	case TypeDate:
		d, ok := parseDate(s, nil)
		if !ok {
			return "", fmt.Errorf("%q is not a date in a known format", clip(s, 80))
		}
		return d, nil
	}
	return s, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func dedupe(ss []string) []string {
	if len(ss) < 2 {
		return ss
	}
	seen := make(map[string]struct{}, len(ss))
	out := ss[:0]
	for _, s := range ss {
		if _, ok := seen[s]; ok {
			continue
		}
		seen[s] = struct{}{}
		out = append(out, s)
	}
	return out
}

// firstFrames keeps the top of a stack trace, enough to find a bug.
func firstFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	if len(lines) > 16 {
		lines = lines[:16]
	}
	return strings.Join(lines, "\n")
}

// detach copies every string of ex that lies in body's memory (the
// document shares it, see extract) into one new buffer, so that what
// Extract returns stays valid whatever the caller does with body next.
func (d *Document) detach(ex *Extraction, body []byte) {
	t := detacher{lo: uintptr(unsafe.Pointer(unsafe.SliceData(body))), size: uintptr(len(body))}
	t.extraction(ex) // count
	if t.n == 0 {
		return
	}
	d.reserve(t.n)
	t.d = d
	t.extraction(ex) // copy
}

// detacher counts, then copies out, the strings that lie in the size
// bytes from lo.
type detacher struct {
	lo, size uintptr
	n        int       // bytes to copy
	d        *Document // copy into d's buffer; nil: count only
}

func (t *detacher) one(s *string) {
	if uintptr(unsafe.Pointer(unsafe.StringData(*s)))-t.lo < t.size {
		t.take(s)
	}
}

// take is apart from one so that one, inlined, stays a range check.
//
//go:noinline
func (t *detacher) take(s *string) {
	if t.d == nil {
		t.n += len(*s)
	} else {
		*s = t.d.concat(*s, "", "")
	}
}

func (t *detacher) all(ss []string) {
	for i := range ss {
		t.one(&ss[i])
	}
}

func (t *detacher) extraction(ex *Extraction) {
	t.all(ex.Mappings)
	for i := range ex.Fields {
		fv := &ex.Fields[i]
		t.one(&fv.Mapping)
		t.one(&fv.Field)
		t.all(fv.Values)
	}
	t.all(ex.Links)
	t.all(ex.OutLinks)
	t.all(ex.Anchors)
	for i := range ex.Errors {
		e := &ex.Errors[i]
		t.one(&e.Mapping)
		t.one(&e.Field)
		t.one(&e.Processor)
		t.one(&e.Err)
	}
}
