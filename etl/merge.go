package etl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Merge returns one set holding the mappings of every set, in order, as if
// their files had been loaded together: the bundled or a user's mappings
// with learned ones (run --use-learned). A mapping name found in two sets
// is an error naming both files. The digest covers every part, so a
// dispatcher and a supervisor agree only when they merged the same sets;
// the HTML parser is the first set's.
func Merge(sets ...*Set) (*Set, error) {
	out := &Set{}
	h := sha256.New()
	byName := map[string]*Mapping{}
	for i, s := range sets {
		if s == nil {
			continue
		}
		if i == 0 {
			out.parser = s.parser
		}
		fmt.Fprintf(h, "%s\x00", s.digest)
		for _, m := range s.mappings {
			if prev, dup := byName[m.Name]; dup {
				return nil, &LoadError{File: m.File, Mapping: m.Name, Err: fmt.Errorf("duplicate mapping name, already defined in %s", prev.File)}
			}
			byName[m.Name] = m
			out.mappings = append(out.mappings, m)
		}
		out.fields = append(out.fields, s.fields...)
		out.planTags = append(out.planTags, s.planTags...)
	}
	out.digest = hex.EncodeToString(h.Sum(nil))
	out.fields = sortedUnique(out.fields)
	out.planTags = sortedUnique(out.planTags)
	out.plan = newScanPlan(out.planTags)
	return out, nil
}
