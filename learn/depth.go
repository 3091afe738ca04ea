package learn

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The depth search finds a teacher's page where the crawl would: within
// Options.Depth links of the teacher's own links. It goes level by level,
// every host's pages through the same Source (politely, one at a time per
// host), and stops following a teacher's links once a page shows every
// value the teacher knows. Of the pages a teacher reaches, its teacher
// page is the one showing the most of its known values, provided it names
// the teacher (its match key, when known) and shows all or nearly all
// the others (enough): a team page naming a member and their job, or a
// colleague's profile naming them under "See also", shows a value or two
// among others' and teaches nothing about where a profile keeps them.

// reachedPage is a page of the depth search.
type reachedPage struct {
	job   *fetchJob
	doc   *doc
	links []string
}

// teacherHit is the best page a teacher reached so far.
type teacherHit struct {
	page  *reachedPage
	shown int
}

// searchDepth fetches the pages within opts.Depth links of the teachers'
// own links (links[t]) and returns, per teacher, its teacher page (nil
// when none names it and shows enough of its known values).
func searchDepth(ctx context.Context, teachers []Teacher, links [][]string, known [][]string, kinds map[string]kind, src Source, opts Options, res *Result) ([]*reachedPage, error) {
	pages := map[string]*reachedPage{}
	perHost := map[string]int{}
	best := make([]teacherHit, len(teachers))
	open := make([]bool, len(teachers))
	level := map[string]map[int]bool{}
	for t, ls := range links {
		if len(known[t]) == 0 {
			continue
		}
		open[t] = true
		for _, l := range ls {
			if level[l] == nil {
				level[l] = map[int]bool{}
			}
			level[l][t] = true
		}
	}
	hostOf := func(u string) string {
		if pu, err := url.Parse(u); err == nil {
			return strings.ToLower(pu.Host)
		}
		return ""
	}
	// visit fetches the pages of urls not had yet and scores each for
	// the open teachers that reached it.
	visit := func(depth int, urls []string) error {
		byHost := map[string][]string{}
		for _, u := range urls {
			if pages[u] == nil {
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
				if perHost[h] >= opts.PagesPerHost {
					res.Capped[h]++
					continue
				}
				perHost[h]++
				jobs[i] = append(jobs[i], fetchJob{url: u, depth: depth})
			}
		}
		if err := fetchAll(ctx, src, hosts, jobs, opts); err != nil {
			return err
		}
		for i := range jobs {
			for k := range jobs[i] {
				j := &jobs[i][k]
				rp := &reachedPage{job: j}
				pages[j.url] = rp
				if j.err != nil {
					if depth > 0 {
						res.DeepFailed++
						continue
					}
					var ts []int
					for t := range level[j.url] {
						ts = append(ts, t)
					}
					sort.Ints(ts)
					for _, t := range ts {
						res.Failed = append(res.Failed, FetchError{URL: j.url, Teacher: teachers[t].ID, Err: j.err})
					}
					continue
				}
				rp.doc = parseDoc(j.page)
				rp.links = rp.doc.anchors()
			}
		}
		for _, u := range urls {
			rp := pages[u]
			if rp == nil || rp.doc == nil {
				continue
			}
			for t := range level[u] {
				if !open[t] {
					continue
				}
				n := 0
				for _, f := range known[t] {
					shown := len(rp.doc.locate(kinds[f], strings.TrimSpace(teachers[t].Values[f]))) > 0
					switch {
					case f == opts.MatchKey && !shown:
						// A page that does not name the teacher is not
						// its page, whatever else it shows.
						n = -len(known[t])
					case f != opts.MatchKey && shown:
						n++
					}
				}
				if n > best[t].shown {
					best[t] = teacherHit{page: rp, shown: n}
				}
			}
		}
		for t := range open {
			if open[t] && best[t].shown == nonKey(known[t], opts.MatchKey) {
				open[t] = false
			}
		}
		return nil
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
		shared := map[string]map[int]bool{}
		for _, u := range urls {
			h := hostOf(u)
			if shared[h] == nil {
				shared[h] = map[int]bool{}
			}
			for t := range level[u] {
				shared[h][t] = true
			}
		}
		var first, rest []string
		for _, u := range urls {
			if len(shared[hostOf(u)]) >= opts.MinTeachers {
				first = append(first, u)
			} else {
				rest = append(rest, u)
			}
		}
		if err := visit(depth, first); err != nil {
			return nil, err
		}
		wanted := rest[:0]
		for _, u := range rest {
			for t := range level[u] {
				if open[t] {
					wanted = append(wanted, u)
					break
				}
			}
		}
		if err := visit(depth, wanted); err != nil {
			return nil, err
		}
		if depth == opts.Depth {
			break
		}
		next := map[string]map[int]bool{}
		for _, u := range urls {
			rp := pages[u]
			if rp == nil || rp.doc == nil {
				continue
			}
			for t := range level[u] {
				if !open[t] {
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
		level = next
	}
	out := make([]*reachedPage, len(teachers))
	for t, b := range best {
		if b.page != nil && b.shown >= enough(nonKey(known[t], opts.MatchKey)) {
			out[t] = b.page
		}
	}
	return out, nil
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

// depthReason says why a teacher taught nothing in the depth search.
func depthReason(d int) string {
	return fmt.Sprintf("no page within %d link(s) of its own links names it and shows (nearly) all its known values", d)
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
