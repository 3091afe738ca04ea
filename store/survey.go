package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// SurveyRow is one result line of a host survey (package survey): a
// domain's web metadata, or one ip:port's liveness. The store keeps the
// row as the JSON the survey wrote, byte for byte; its schema is the
// survey's (docs/survey.md).
type SurveyRow struct {
	Survey string    // which survey run, e.g. "web/3"
	Key    string    // the row's key within the run: a domain, or ip:port
	At     time.Time // when the row's result was found
	Doc    []byte    // the row, a JSON object
}

// Surveys holds the rows of host surveys. Writes are idempotent upserts by
// (Survey, Key), so a redelivered result changes nothing.
type Surveys interface {
	PutSurveyRows(ctx context.Context, rows []SurveyRow) error
	// SurveyRows calls fn for every row of survey, in Key order.
	SurveyRows(ctx context.Context, survey string, fn func(SurveyRow) error) error
}

// checkSurveyRows refuses what no backend can store faithfully.
func checkSurveyRows(rows []SurveyRow) error {
	for i, r := range rows {
		switch {
		case r.Survey == "" || r.Key == "":
			return fmt.Errorf("store: put survey rows: row %d: empty survey or key", i)
		case !json.Valid(r.Doc):
			return fmt.Errorf("store: put survey rows: row %d (%s %s): doc is not JSON", i, r.Survey, r.Key)
		}
	}
	return nil
}
