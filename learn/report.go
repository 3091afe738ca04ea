package learn

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Bounds on what the report lists: misses per field, teachers that
// taught nothing.
const (
	maxMissesShown   = 5
	maxUntaughtShown = 10
)

// Report writes what was learned and what was not, group by group and
// field by field, with the evidence, the reasons and the held-out misses.
func (r *Result) Report(w io.Writer) {
	key := r.Options.MatchKey
	fmt.Fprintf(w, "%d teacher record(s); %d group(s) of teacher pages; %d mapping(s) learned\n", r.Teachers, len(r.Groups), r.Mappings())
	if r.Options.Depth > 0 {
		fmt.Fprintf(w, "teacher pages searched within %d link(s) of the teachers' own links\n", r.Options.Depth)
	}
	for _, g := range r.Groups {
		fmt.Fprintf(w, "\n%s  %s  (%d teacher page(s))", g.Name, g.Pattern, len(g.Pages))
		ms, _ := g.mappings(key)
		switch {
		case len(ms) == 1:
			fmt.Fprintf(w, " → %s.json\n", ms[0].Name)
		case len(ms) > 1:
			fmt.Fprintf(w, " → %d mappings, one per layout of its pages: %s-1.json … %s-%d.json\n", len(ms), g.Name, g.Name, len(ms))
		case g.Learned():
			fmt.Fprintf(w, ": no mapping written: %s\n", g.withheld(key))
		default:
			fmt.Fprintf(w, ": nothing learned, no mapping written\n")
		}
		width := 0
		for _, f := range g.Fields {
			width = max(width, len(f.Field))
		}
		for _, f := range g.Fields {
			match := ""
			if f.Match {
				match = " (match key)"
			}
			fmt.Fprintf(w, "  %-*s  %s%s", width, f.Field, f.Status, match)
			switch f.Status {
			case Learned:
				fmt.Fprintf(w, ": %s\n      %s\n", f.Rule, f.Evidence())
			case FailedHoldOut:
				fmt.Fprintf(w, ": %s\n      rule learned from all teachers: %s\n", f.Reason, f.Rule)
			default:
				fmt.Fprintf(w, ": %s\n", f.Reason)
			}
			for i, m := range f.Misses {
				if i == maxMissesShown {
					fmt.Fprintf(w, "      … and %d more\n", len(f.Misses)-i)
					break
				}
				got := "nothing"
				if m.Got != "" {
					got = fmt.Sprintf("%q", m.Got)
				}
				fmt.Fprintf(w, "      miss: %s: want %q, got %s (by %s)\n", m.URL, m.Want, got, m.Rule)
			}
		}
	}
	r.reportUntaught(w)
	if r.DeepFailed > 0 {
		fmt.Fprintf(w, "\n%d page(s) reached by links could not be had (disallowed by robots.txt, missing or failing); they are not teacher pages\n", r.DeepFailed)
	}
	if len(r.Capped) > 0 {
		var hosts []string
		n := 0
		for h, c := range r.Capped {
			hosts = append(hosts, fmt.Sprintf("%s (%d)", h, c))
			n += c
		}
		sort.Strings(hosts)
		fmt.Fprintf(w, "\n%d page(s) not fetched, over %d a host (--pages-per-host): %s; raise it to learn from them\n",
			n, r.Options.PagesPerHost, strings.Join(hosts, ", "))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "\nhosts not fetched:\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", s.Host, s.Reason)
		}
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(w, "\nteacher pages that could not be fetched (%d):\n", len(r.Failed))
		for i, f := range r.Failed {
			if i == 20 {
				fmt.Fprintf(w, "  … and %d more\n", len(r.Failed)-i)
				break
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", f.URL, f.Teacher, strings.TrimSpace(f.Err.Error()))
		}
	}
}

// Mappings counts the mappings Write writes.
func (r *Result) Mappings() int {
	n := 0
	for _, g := range r.Groups {
		ms, _ := g.mappings(r.Options.MatchKey)
		n += len(ms)
	}
	return n
}

// reportUntaught lists the teachers that taught nothing with what their
// best page showed of them, and advises a deeper search only for those
// no page within the depth named.
func (r *Result) reportUntaught(w io.Writer) {
	if len(r.Untaught) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d teacher(s) taught nothing:\n", len(r.Untaught))
	unnamed := 0
	for i, u := range r.Untaught {
		if u.URL == "" {
			unnamed++
		}
		if i < maxUntaughtShown {
			fmt.Fprintf(w, "  %s: %s\n", u.Teacher, u.why(r.Options))
		}
	}
	if n := len(r.Untaught) - maxUntaughtShown; n > 0 {
		fmt.Fprintf(w, "  … and %d more (every one in %s)\n", n, ReportFile)
	}
	if unnamed > 0 {
		fmt.Fprintf(w, "no page within %d link(s) of their own links named %d of them; a deeper --depth may reach their pages\n", r.Options.Depth, unnamed)
	}
}

// why says in words why a teacher taught nothing.
func (u Untaught) why(o Options) string {
	if u.URL == "" {
		if o.MatchKey == "" {
			return fmt.Sprintf("no page within %d link(s) of its own links shows its values", o.Depth)
		}
		return fmt.Sprintf("no page within %d link(s) of its own links names it", o.Depth)
	}
	var b strings.Builder
	b.WriteString(u.URL)
	if u.Named {
		b.WriteString(" names it and")
	}
	switch {
	case len(u.Shown) == 0:
		fmt.Fprintf(&b, " shows none of its values (%s)", strings.Join(u.Missing, ", "))
	default:
		fmt.Fprintf(&b, " shows its %s, not its %s", strings.Join(u.Shown, ", "), strings.Join(u.Missing, ", "))
	}
	switch {
	case u.Note != "":
		b.WriteString(": " + u.Note)
	case !u.Named && o.MatchKey != "":
		fmt.Fprintf(&b, ": without its %s, a page must show nearly all its values to be its", o.MatchKey)
	case !u.Named:
		b.WriteString(": without a match key, a page must show nearly all its values to be its")
	}
	return b.String()
}
