package learn

import (
	"fmt"
	"io"
	"strings"
)

// maxMissesShown bounds the misses the report lists per field.
const maxMissesShown = 5

// Report writes what was learned and what was not, group by group and
// field by field, with the evidence, the reasons and the held-out misses.
func (r *Result) Report(w io.Writer) {
	learned := 0
	for _, g := range r.Groups {
		if g.Learned() {
			learned++
		}
	}
	fmt.Fprintf(w, "%d teacher record(s); %d group(s) of teacher pages; %d mapping(s) learned\n", r.Teachers, len(r.Groups), learned)
	for _, g := range r.Groups {
		fmt.Fprintf(w, "\n%s  %s  (%d teacher page(s))", g.Name, g.Pattern, len(g.Pages))
		if g.Learned() {
			fmt.Fprintf(w, " → %s.json\n", g.Name)
		} else {
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
