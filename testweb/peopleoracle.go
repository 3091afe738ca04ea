package testweb

import "sort"

// PeopleOracle is what a crawler that knows the people web needs to fill
// every value a correct crawl c fills (PeopleTruth): Pages, the pages on
// a shortest path from each record's own link to the profile holding its
// values, and Robots, one robots.txt for each host of those pages. A
// record with no value to find needs no page: the oracle knows. Paths are
// found breadth first over the model's links in the order pages list
// them, through pages that exist, that robots.txt allows and whose host
// is up, to c.Depth; the first shortest path found is taken, so the
// union over records can be a few pages above the least possible (paths
// that share pages are not sought out). Requests is Pages plus Robots.
type PeopleOracle struct {
	Pages    []string // sorted
	Robots   int
	Requests int
	Records  int // records with a value to find
}

// PeopleOracleOf computes the oracle of a crawl c of a web started by
// StartPeople (the zero oracle for any other web).
func PeopleOracleOf(w *Web, c PeopleCrawl) PeopleOracle {
	if w == nil || w.people == nil {
		return PeopleOracle{}
	}
	s := w.people
	down := make(map[string]bool, len(c.Down))
	for _, h := range c.Down {
		down[canonicalHost(h)] = true
	}
	truth := PeopleTruth(w, c)
	need := map[string]bool{}
	hosts := map[int]bool{}
	var o PeopleOracle
	for i := range s.records {
		r := &s.records[i]
		found := false
		for _, v := range truth[r.id] {
			found = found || v != ""
		}
		if !found {
			continue
		}
		o.Records++
		path := s.shortestPath(r.link, r.person, c, down)
		for _, u := range path {
			need[u] = true
			if h, _, ok := s.split(u); ok {
				hosts[h] = true
			}
		}
	}
	for u := range need {
		o.Pages = append(o.Pages, u)
	}
	sort.Strings(o.Pages)
	o.Robots = len(hosts)
	o.Requests = len(o.Pages) + o.Robots
	return o
}
