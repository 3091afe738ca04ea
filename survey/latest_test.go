package survey_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"backfill/survey"
)

// TestLatestNoSurvey: a state directory where no survey ran has no
// summaries, and Latest leaves it as it was.
func TestLatestNoSurvey(t *testing.T) {
	dir := t.TempDir()
	got, err := survey.Latest(context.Background(), dir)
	if err != nil || got != nil {
		t.Fatalf("Latest = %v, %v; want none", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "survey.db")); !os.IsNotExist(err) {
		t.Errorf("Latest made a survey state: %v", err)
	}
}
