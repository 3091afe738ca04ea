package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"backfill/etl"
	"backfill/fetch"
	"backfill/store"
	"backfill/wire"
)

// finishSafe runs finish, answering "panic" if extraction panics, and
// always gives the task's capacity back.
func (s *Supervisor) finishSafe(ctx context.Context, p *page) {
	// Whichever way the task was answered, its count of 429/503 answers
	// goes with it: health keeps counts of held tasks only; so does the
	// chain of its redirects.
	s.health.settled(p.task.ID)
	defer s.hops.forget(p.task.ID)
	released := false
	release := func() {
		if !released {
			released = true
			s.sched.done()
		}
	}
	defer release()
	var res *wire.Result
	func() {
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic while processing page recovered", "url", p.task.URL, "host", p.task.Host, "class", ClassPanic, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				res = s.answer(p.task, ClassPanic, fmt.Sprintf("panic: %v", v))
			}
		}()
		res = s.finish(ctx, p)
	}()
	if ctx.Err() != nil {
		// Stopping: a page fetched is worth its result (fetching it
		// again would cost its host a request), if it goes out at once.
		// A failure may be the stop's own doing: the lease covers it.
		if res.Class != "" {
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
		defer cancel()
	}
	switch {
	case p.kept:
		s.reanswered.Add(1)
	case res.Class == "":
		s.fetched.Add(1)
		s.answers.keep(p.task, res)
	case res.Class == wire.ClassDeferred:
		s.deferred.Add(1)
	default:
		s.countFailed(res.Class)
	}
	s.logPage(p, res)
	if p.delay > 0 || !p.ready.IsZero() {
		// A copy: a kept answer may be read while this one goes out.
		paced := *res
		paced.Delay, paced.Ready = p.delay, max(time.Until(p.ready), 0)
		res = &paced
	}
	// The slot is freed before the result can reach the dispatcher: it
	// counts the task done when the result arrives and may send the next
	// one at once, which must find room here.
	release()
	s.sendResult(ctx, fitFrame(res))
}

// logPage says at debug level what became of one task: one line per page,
// naming its URL and host, and its failure class when it failed.
func (s *Supervisor) logPage(p *page, res *wire.Result) {
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	args := []any{"url", p.task.URL, "host", p.task.Host, "status", res.Status}
	if !p.start.IsZero() {
		args = append(args, "ms", time.Since(p.start).Milliseconds())
	}
	if res.Class != "" {
		s.log.Debug("page failed", append(args, "class", res.Class, "error", res.Error)...)
		return
	}
	s.log.Debug("page done", append(args, "bytes", res.Bytes, "fields", len(res.Fields), "links", len(res.Links), "render", p.task.Render)...)
}

// finish builds the Result of a page: its answer if already known, its
// failure class, or what the mappings extracted from it (once rendered,
// for a page to render).
func (s *Supervisor) finish(ctx context.Context, p *page) *wire.Result {
	if p.res != nil {
		return p.res
	}
	t := p.task
	res := &wire.Result{TaskID: t.ID, Lease: t.Lease, Supervisor: s.cfg.Name, URL: t.URL, FetchedAt: p.start.UTC(),
		Chain: s.hops.before(t.ID)}
	if p.resp != nil {
		res.FinalURL = p.resp.URL
		res.Status = p.resp.Status
		res.Bytes = int64(len(p.resp.Body))
	}
	if p.err != nil || p.resp == nil {
		failed(res, p)
		return res
	}
	res.ETag, res.LastModified = validators(p.resp)
	res.TLSError = p.resp.TLSError
	if p.resp.NotModified {
		// The page is what the dispatcher last saw: it answers from its
		// cached extraction.
		res.NotModified = true
		return res
	}
	if p.soft404.matches(t.URL, p.resp) {
		res.Class = ClassSoft404
		res.Error = "resembles the host's answer to an invented path (a soft 404)"
		return res
	}
	pageURL := p.resp.URL
	if pageURL == "" {
		pageURL = t.URL
	}
	if p.render {
		rendered, err := s.renderPage(ctx, pageURL, p.resp)
		if err != nil {
			res.Class, res.Error = string(fetch.ClassOf(err)), err.Error()
			return res
		}
		p.resp = rendered
		res.Bytes = int64(len(rendered.Body))
		if rendered.URL != "" {
			pageURL, res.FinalURL = rendered.URL, rendered.URL
		}
	}
	s.keeper.keep(store.Page{Key: t.URL, URL: pageURL, Status: p.resp.Status, ContentType: p.resp.ContentType,
		Body: p.resp.Body, Rendered: p.render, FetchedAt: p.start})
	s.extract(res, p, pageURL)
	return res
}

// failed fills in res, the Result of a page whose fetch failed, its
// failure class and error.
func failed(res *wire.Result, p *page) {
	err := p.err
	if err == nil {
		err = errors.New("no response")
	}
	res.Class = string(fetch.ClassOf(err))
	if res.Class == "" {
		res.Class = string(fetch.ClassOther)
	}
	res.Error = err.Error()
	res.HopRefused = p.hopRefused
}

// extract runs the mappings on p, fetched (and rendered, if it was to
// be) from pageURL, and fills in res what they found: fields, links, and
// the page's fingerprint when content seen before is to be recognised.
func (s *Supervisor) extract(res *wire.Result, p *page, pageURL string) {
	extract := s.cfg.Mappings.Extract
	if s.cfg.ContentSeen {
		extract = s.cfg.Mappings.ExtractWithFingerprint
	}
	var ex *etl.Extraction
	s.parse(func() { ex = extract(pageURL, p.resp.Body, p.resp.ContentType) })
	if ex == nil {
		return
	}
	res.Mappings = ex.Mappings
	for _, f := range ex.Fields {
		res.Fields = append(res.Fields, wire.Field{Mapping: f.Mapping, Name: f.Field, Values: f.Values, Match: f.Match})
	}
	for _, e := range ex.Errors {
		res.FieldErrs = append(res.FieldErrs, e.String())
	}
	res.Links = wire.MergeLinks(ex.Links, ex.OutLinks, ex.Anchors, wire.MaxResultLinks)
	if !p.render {
		res.JSOnly = ex.JSOnly
		if ex.JSOnly && s.docs != nil {
			s.docs.put(p.task.URL, p.resp)
		}
	}
	if s.cfg.ContentSeen {
		fp := ex.Fingerprint
		res.TextHash, res.Simhash, res.Words = fp.Exact[:], fp.Sim, fp.Words
	}
}

// parse runs f, an extraction, holding one of the extraction slots:
// extraction is CPU work, and more at once than the CPUs run only holds
// more parsed pages in memory.
func (s *Supervisor) parse(f func()) {
	s.extracting <- struct{}{}
	defer func() { <-s.extracting }()
	f()
}

// maxValidator bounds an ETag or Last-Modified kept for the next
// conditional request; a longer one is not worth a place in the
// dispatcher's state.
const maxValidator = 256

// validators are the ETag and Last-Modified of a fetched page, for the
// dispatcher to send back when it fetches the page again.
func validators(resp *fetch.Response) (etag, lastModified string) {
	if resp == nil || resp.Header == nil {
		return "", ""
	}
	keep := func(v string) string {
		if len(v) > maxValidator {
			return ""
		}
		return v
	}
	return keep(resp.Header.Get("Etag")), keep(resp.Header.Get("Last-Modified"))
}

// fitFrame trims a Result that would not fit in one frame, saying so in
// Error: first absurd field values (over 64 KiB, or beyond 100 per field),
// then links from the end. Ordinary results are far below the limit and are
// returned untouched without being encoded here.
func fitFrame(r *wire.Result) *wire.Result {
	const maxValue, maxValues = 64 << 10, 100
	if approxSize(r) < wire.MaxFrame/8 {
		return r
	}
	valuesCapped := false
	for {
		b, err := wire.Encode(wire.KindResult, r)
		if err == nil && len(b) <= wire.MaxFrame {
			return r
		}
		t := *r
		t.Error = "result trimmed to fit one frame"
		switch {
		case !valuesCapped:
			valuesCapped = true
			t.Fields = make([]wire.Field, 0, len(r.Fields))
			for _, f := range r.Fields {
				vals := make([]string, 0, min(len(f.Values), maxValues))
				for _, v := range f.Values[:min(len(f.Values), maxValues)] {
					if len(v) > maxValue {
						v = v[:maxValue]
					}
					vals = append(vals, v)
				}
				f.Values = vals
				t.Fields = append(t.Fields, f)
			}
			t.FieldErrs = r.FieldErrs[:min(len(r.FieldErrs), maxValues)]
		case len(r.Links) > 0:
			t.Links = r.Links[:len(r.Links)/2]
		default:
			t.Fields, t.FieldErrs, t.Links = nil, nil, nil
			return &t
		}
		r = &t
	}
}

// approxSize is a cheap lower bound of a Result's encoded size.
func approxSize(r *wire.Result) int {
	n := len(r.URL) + len(r.FinalURL) + len(r.Error)
	for _, f := range r.Fields {
		for _, v := range f.Values {
			n += len(v) + 4
		}
	}
	for _, l := range r.Links {
		n += len(l.URL) + len(l.Text) + 16
	}
	for _, e := range r.FieldErrs {
		n += len(e) + 4
	}
	return n
}

// renderPage loads a fetched page in the browser and returns the DOM it
// ends with. The page's requests are made by subFetch, and the resource
// kinds its mappings allow are let through.
func (s *Supervisor) renderPage(ctx context.Context, pageURL string, doc *fetch.Response) (*fetch.Response, error) {
	start := time.Now()
	resp, err := s.render.Render(ctx, renderJob{doc: doc, allow: s.cfg.Mappings.RenderResources(pageURL), get: s.subFetch})
	s.meter.renderSeconds.Observe(time.Since(start).Seconds())
	return resp, err
}
