package learn

import (
	"context"
	"net/url"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The depth search finds a teacher's page where the crawl would: within
// Options.Depth links of the teacher's own links. It goes level by level,
// every host's pages through the same Source (politely, one at a time per
// host), and stops following a teacher's links once a page shows every
// value the teacher knows. Of the pages a teacher reaches that name it
// (show its match key), its page is the one showing the most of its
// other known values. It is the teacher's page for the values it shows,
// field by field: a value written otherwise, or in a place learning does
// not read, loses that field, not the page. A page showing most of them
// (more than half) is the teacher's (strong); a page showing fewer may be
// a team page naming a member and their job, or a colleague's profile
// naming them under "See also", so it is the teacher's only where the
// group's learned match key reads the teacher's name on it (weak; see
// learnGroups). A teacher whose match key is unknown has no page unless
// one shows nearly all its values (enough).

// reachedPage is a page of the depth search. Its parsed document is
// kept while the page is scored and dropped after (a search reads many
// pages of 150 KB); its links stay.
type reachedPage struct {
	job    *fetchJob
	doc    *doc
	links  []string
	parsed bool // links were read
}

// parse returns the page's document, parsing it again when it was
// dropped.
func (rp *reachedPage) parse() *doc {
	if rp.doc == nil {
		rp.doc = parseDoc(rp.job.page)
	}
	if !rp.parsed {
		rp.links, rp.parsed = rp.doc.anchors(), true
	}
	return rp.doc
}

// release drops the page's document.
func (rp *reachedPage) release() { rp.doc = nil }

// teacherHit is the best page a teacher reached so far: one that names
// it, with the fields whose values it shows.
type teacherHit struct {
	page  *reachedPage
	found []string // the known fields, the match key aside, whose values it shows
}

// teacherPage is what the search found for a teacher.
type teacherPage struct {
	page   *reachedPage // nil: none
	strong bool         // the page shows most of the teacher's values
}

// depthSearch is one search for the teachers' pages: what it fetched,
// each teacher's best page so far, and the teachers still followed.
type depthSearch struct {
	ctx      context.Context
	teachers []Teacher
	known    [][]string // per teacher, the fields it knows
	kinds    map[string]kind
	src      Source
	opts     Options
	res      *Result

	pages   map[string]*reachedPage // every URL had (or failed), by URL
	perHost map[string]int          // pages asked of each host
	best    []teacherHit
	open    []bool // the teacher's links are still followed
}

// searchDepth fetches the pages within opts.Depth links of the teachers'
// own links (links[t]) and returns the search, whose found says each
// teacher's page.
func searchDepth(ctx context.Context, teachers []Teacher, links [][]string, known [][]string, kinds map[string]kind, src Source, opts Options, res *Result) (*depthSearch, error) {
	s := &depthSearch{ctx: ctx, teachers: teachers, known: known, kinds: kinds, src: src, opts: opts, res: res,
		pages: map[string]*reachedPage{}, perHost: map[string]int{},
		best: make([]teacherHit, len(teachers)), open: make([]bool, len(teachers))}
	level := map[string]map[int]bool{}
	for t, ls := range links {
		if len(known[t]) == 0 {
			continue
		}
		s.open[t] = true
		for _, l := range ls {
			if level[l] == nil {
				level[l] = map[int]bool{}
			}
			level[l][t] = true
		}
	}
	for depth := 0; depth <= opts.Depth && len(level) > 0; depth++ {
		urls := make([]string, 0, len(level))
		for u := range level {
			urls = append(urls, u)
		}
		sort.Strings(urls)
		// The pages of hosts that many of the teachers' links reach come
		// first, as a site's pages: a teacher they satisfy has the rest
		// (its own website, a social profile) left alone.
		first, rest := s.shared(urls, level)
		if err := s.visit(depth, first, level); err != nil {
			return nil, err
		}
		if err := s.visit(depth, s.wanted(rest, level), level); err != nil {
			return nil, err
		}
		if depth == opts.Depth {
			break
		}
		level = s.next(urls, level)
	}
	return s, nil
}

// hostOf is the lower-cased host of a URL, "" when it does not parse.
func hostOf(u string) string {
	if pu, err := url.Parse(u); err == nil {
		return strings.ToLower(pu.Host)
	}
	return ""
}

// shared splits a level's URLs into those of hosts that at least
// Options.MinTeachers teachers reach, and the rest.
func (s *depthSearch) shared(urls []string, level map[string]map[int]bool) (first, rest []string) {
	reach := map[string]map[int]bool{}
	for _, u := range urls {
		h := hostOf(u)
		if reach[h] == nil {
			reach[h] = map[int]bool{}
		}
		for t := range level[u] {
			reach[h][t] = true
		}
	}
	for _, u := range urls {
		if len(reach[hostOf(u)]) >= s.opts.MinTeachers {
			first = append(first, u)
		} else {
			rest = append(rest, u)
		}
	}
	return first, rest
}

// wanted keeps the URLs some open teacher reaches.
func (s *depthSearch) wanted(urls []string, level map[string]map[int]bool) []string {
	out := urls[:0]
	for _, u := range urls {
		for t := range level[u] {
			if s.open[t] {
				out = append(out, u)
				break
			}
		}
	}
	return out
}

// visit fetches the pages of urls not had yet and scores each for the
// open teachers that reached it.
func (s *depthSearch) visit(depth int, urls []string, level map[string]map[int]bool) error {
	hosts, jobs := s.jobs(depth, urls)
	if err := fetchAll(s.ctx, s.src, hosts, jobs, s.opts); err != nil {
		return err
	}
	for i := range jobs {
		for k := range jobs[i] {
			s.keep(depth, &jobs[i][k], level)
		}
	}
	// One page parsed at a time, kept only as a teacher's best.
	for _, u := range urls {
		rp := s.pages[u]
		if rp == nil || rp.job.err != nil {
			continue
		}
		reached := false
		for t := range level[u] {
			reached = reached || s.open[t]
		}
		if !reached && rp.parsed {
			continue
		}
		rp.parse()
		for t := range level[u] {
			if s.open[t] {
				s.score(t, rp)
			}
		}
		rp.release()
	}
	for t := range s.open {
		if s.open[t] && len(s.best[t].found) == nonKey(s.known[t], s.opts.MatchKey) {
			s.open[t] = false
		}
	}
	return nil
}

// jobs are the fetches of urls not had yet, by host, within the bound
// of pages a host.
func (s *depthSearch) jobs(depth int, urls []string) ([]string, [][]fetchJob) {
	byHost := map[string][]string{}
	for _, u := range urls {
		if s.pages[u] == nil {
			byHost[hostOf(u)] = append(byHost[hostOf(u)], u)
		}
	}
	var hosts []string
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	jobs := make([][]fetchJob, len(hosts))
	for i, h := range hosts {
		for _, u := range byHost[h] {
			if s.perHost[h] >= s.opts.PagesPerHost {
				s.res.Capped[h]++
				continue
			}
			s.perHost[h]++
			jobs[i] = append(jobs[i], fetchJob{url: u, depth: depth})
		}
	}
	return hosts, jobs
}

// keep records what came of a fetch: the page parsed, or the failure,
// counted against the teachers whose own link it was.
func (s *depthSearch) keep(depth int, j *fetchJob, level map[string]map[int]bool) {
	s.pages[j.url] = &reachedPage{job: j}
	if j.err == nil {
		return
	}
	if depth > 0 {
		s.res.DeepFailed++
		return
	}
	var ts []int
	for t := range level[j.url] {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		s.res.Failed = append(s.res.Failed, FetchError{URL: j.url, Teacher: s.teachers[t].ID, Err: j.err})
	}
}

// score finds which known values of teacher t page rp shows, and keeps
// the page as t's best when it names t and shows more than the best so
// far.
func (s *depthSearch) score(t int, rp *reachedPage) {
	key := s.keyOf(t)
	if key != "" && len(rp.doc.locate(s.kinds[s.opts.MatchKey], key)) == 0 {
		// A page that does not name the teacher is not its page,
		// whatever else it shows.
		return
	}
	var found []string
	for _, f := range s.known[t] {
		if f != s.opts.MatchKey && len(rp.doc.locate(s.kinds[f], strings.TrimSpace(s.teachers[t].Values[f]))) > 0 {
			found = append(found, f)
		}
	}
	if b := &s.best[t]; b.page == nil && (key != "" || len(found) > 0) || len(found) > len(b.found) {
		*b = teacherHit{page: rp, found: found}
	}
}

// keyOf is teacher t's match key, "" when unknown.
func (s *depthSearch) keyOf(t int) string {
	if s.opts.MatchKey == "" {
		return ""
	}
	return strings.TrimSpace(s.teachers[t].Values[s.opts.MatchKey])
}

// next is the following level: the links of this level's pages, each
// with the open teachers that reached it.
func (s *depthSearch) next(urls []string, level map[string]map[int]bool) map[string]map[int]bool {
	next := map[string]map[int]bool{}
	for _, u := range urls {
		rp := s.pages[u]
		if rp == nil || !rp.parsed {
			continue
		}
		for t := range level[u] {
			if !s.open[t] {
				continue
			}
			for _, l := range rp.links {
				if next[l] == nil {
					next[l] = map[int]bool{}
				}
				next[l][t] = true
			}
		}
	}
	return next
}

// found is each teacher's page: its best, strong when it shows most of
// the teacher's values (nearly all, when its match key is unknown), weak
// when it names the teacher and shows fewer.
func (s *depthSearch) found() []teacherPage {
	out := make([]teacherPage, len(s.teachers))
	for t, b := range s.best {
		n, shown := nonKey(s.known[t], s.opts.MatchKey), len(b.found)
		switch {
		case b.page == nil || shown == 0:
		case s.keyOf(t) == "":
			if shown >= enough(n) {
				out[t] = teacherPage{page: b.page, strong: true}
			}
		default:
			out[t] = teacherPage{page: b.page, strong: shown*2 > n}
		}
	}
	return out
}

// untaught says what the best page a teacher reached showed of it, for
// a teacher that taught nothing.
func (s *depthSearch) untaught(t int) Untaught {
	u := Untaught{Teacher: s.teachers[t].ID}
	b := s.best[t]
	if b.page == nil {
		return u
	}
	u.URL = b.page.job.page.URL
	u.Named = s.keyOf(t) != ""
	for _, f := range s.known[t] {
		switch {
		case f == s.opts.MatchKey:
		case slices.Contains(b.found, f):
			u.Shown = append(u.Shown, f)
		default:
			u.Missing = append(u.Missing, f)
		}
	}
	return u
}

// anchors are the page's links a crawl follows: every <a href>, resolved,
// http(s) only, without fragments, each once.
func (d *doc) anchors() []string {
	if d.root == nil || d.base == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.DataAtom == atom.A || n.DataAtom == atom.Area) {
			if href := strings.TrimSpace(attr(n, "href")); href != "" {
				if u, err := d.base.Parse(href); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
					u.Fragment, u.RawFragment = "", ""
					if s := u.String(); !seen[s] {
						seen[s] = true
						out = append(out, s)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return out
}

// nonKey counts the fields besides the match key.
func nonKey(fields []string, matchKey string) int {
	n := 0
	for _, f := range fields {
		if f != matchKey {
			n++
		}
	}
	return n
}

// enough is how many of n known values a page must show to be the
// teacher's: all of up to three (two values of a dozen jobs and cities
// coincide on someone else's page often enough), one fewer of four to
// six, and so on, so that a value the record has out of date does not
// lose the teacher.
func enough(n int) int { return n - (n-1)/3 }
