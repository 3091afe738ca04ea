package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"backfill/etl"
	"backfill/learn"
)

// learnedTargets decides the fields a crawl with --use-learned fills when
// --fields names none (fields empty). By default a crawl fills the fields
// its mappings produce, so a field learning was asked for and did not
// learn would never be a target, and a record lacking it would count as
// complete. When the learned mappings are the crawl's only fields (the
// --mappings directory adds none of its own), the targets are the
// fields learning was asked for: a record lacking one that no learned
// mapping fills stays incomplete, and the summary says so. Beside other
// mappings the default stands, and the log names the fields left out.
func (m *mappingFlags) learnedTargets(fields []string, set *etl.Set, log *slog.Logger) ([]string, error) {
	if m.learned == "" || len(fields) > 0 {
		return fields, nil
	}
	asked, err := learn.ReadFields(m.learned)
	if err != nil {
		return nil, fmt.Errorf("--use-learned %s: %w", m.learned, err)
	}
	if len(asked) == 0 {
		return fields, nil
	}
	var unlearned []string
	for _, f := range asked {
		if !slices.Contains(set.FieldNames(), f) {
			unlearned = append(unlearned, f)
		}
	}
	base, err := loadMappingDir(m.dir)
	if err != nil {
		return nil, err
	}
	var own []string
	for _, f := range base.FieldNames() {
		if !slices.Contains(asked, f) && !slices.Contains(base.MatchFields(), f) {
			own = append(own, f)
		}
	}
	if len(own) == 0 {
		if len(unlearned) > 0 {
			log.Warn("fields no learned mapping fills stay empty, and their records incomplete", "fields", strings.Join(unlearned, ","),
				"do", "learn them with more teachers, or name the fields to fill with --fields")
		}
		return asked, nil
	}
	if len(unlearned) > 0 {
		log.Warn("fields learning was asked for but no mapping fills are not targets: a record lacking them counts as complete", "fields", strings.Join(unlearned, ","),
			"do", "name every field to fill with --fields")
	}
	return fields, nil
}
