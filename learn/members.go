package learn

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// The teacher pages: those of the teachers' own links (Options.Depth 0),
// or those the depth search finds (depth.go).

// member is a teacher page, with the teachers it teaches for: those
// whose values it shows most of, and those it names and shows a value
// or two of (weak), each with what it shows of them, taken only where
// the group's match key agrees (learnGroup).
type member struct {
	page     *Page
	u        *url.URL
	teachers []int
	weak     []int
	weakWhat []Untaught // per weak teacher, what the page shows of it
}

// depthMembers are the teacher pages the depth search finds; the
// teachers it found none for are in res.Untaught.
func depthMembers(ctx context.Context, teachers []Teacher, links, known [][]string, kinds map[string]kind, src Source, opts Options, res *Result) ([]member, error) {
	s, err := searchDepth(ctx, teachers, links, known, kinds, src, opts, res)
	if err != nil {
		return nil, err
	}
	var out []member
	at := map[*reachedPage]int{}
	for t, tp := range s.found() {
		if len(known[t]) == 0 {
			continue
		}
		if tp.page == nil {
			res.Untaught = append(res.Untaught, s.untaught(t))
			continue
		}
		i, ok := at[tp.page]
		if !ok {
			u, err := url.Parse(tp.page.job.page.URL)
			if err != nil {
				continue
			}
			i = len(out)
			at[tp.page] = i
			out = append(out, member{page: tp.page.job.page, u: u})
		}
		if tp.strong {
			out[i].teachers = append(out[i].teachers, t)
		} else {
			out[i].weak = append(out[i].weak, t)
			out[i].weakWhat = append(out[i].weakWhat, s.untaught(t))
		}
	}
	return out, nil
}

// ownMembers fetches the pages of the teachers' own links, host by host:
// each is a teacher page of the teachers linking to it.
func ownMembers(ctx context.Context, teachers []Teacher, links [][]string, src Source, opts Options, res *Result) ([]member, error) {
	type link struct {
		teacher int
		url     string
	}
	byHost := map[string][]link{}
	hostTeachers := map[string]map[int]bool{}
	for i, ls := range links {
		for _, l := range ls {
			u, _ := url.Parse(l)
			h := strings.ToLower(u.Host)
			byHost[h] = append(byHost[h], link{i, l})
			if hostTeachers[h] == nil {
				hostTeachers[h] = map[int]bool{}
			}
			hostTeachers[h][i] = true
		}
	}
	var hosts []string
	for h := range byHost {
		if n := len(hostTeachers[h]); n < opts.MinTeachers {
			res.Skipped = append(res.Skipped, HostSkip{Host: h, Teachers: n,
				Reason: fmt.Sprintf("too few teachers (%d, need %d)", n, opts.MinTeachers)})
			continue
		}
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	sort.Slice(res.Skipped, func(i, j int) bool { return res.Skipped[i].Host < res.Skipped[j].Host })

	// Fetch, host by host; a page linked by two teachers is fetched once.
	jobs := make([][]fetchJob, len(hosts))
	for i, h := range hosts {
		seen := map[string]int{}
		for _, l := range byHost[h] {
			if j, dup := seen[l.url]; dup {
				jobs[i][j].teachers = append(jobs[i][j].teachers, l.teacher)
				continue
			}
			if len(jobs[i]) == opts.PagesPerHost {
				res.Capped[h]++
				continue
			}
			seen[l.url] = len(jobs[i])
			jobs[i] = append(jobs[i], fetchJob{url: l.url, teachers: []int{l.teacher}})
		}
	}
	if err := fetchAll(ctx, src, hosts, jobs, opts); err != nil {
		return nil, err
	}
	var out []member
	for _, hj := range jobs {
		for _, j := range hj {
			if j.err != nil {
				for _, t := range j.teachers {
					res.Failed = append(res.Failed, FetchError{URL: j.url, Teacher: teachers[t].ID, Err: j.err})
				}
				continue
			}
			u, err := url.Parse(j.page.URL)
			if err != nil {
				continue
			}
			out = append(out, member{page: j.page, u: u, teachers: j.teachers})
		}
	}
	return out, nil
}
