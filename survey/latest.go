package survey

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"backfill/wire"
)

// Latest summarizes the latest run of each survey job (web, then ports)
// whose state is in dir, finished or not, for the run report. A
// directory where no survey ran gives none, and is left as it was.
func Latest(ctx context.Context, dir string) ([]*Summary, error) {
	if _, err := os.Stat(filepath.Join(dir, "survey.db")); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	st, err := openState(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer st.close()
	var out []*Summary
	for _, job := range []string{wire.SurveyWeb, wire.SurveyPorts} {
		r := run{job: job}
		err := st.db.QueryRowContext(ctx, `SELECT id, finished IS NOT NULL FROM runs WHERE job = ? ORDER BY id DESC LIMIT 1`, job).
			Scan(&r.id, &r.finished)
		if err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			return nil, fmt.Errorf("survey: read runs: %w", err)
		}
		s, err := summarize(ctx, st, r)
		if err != nil {
			return nil, err
		}
		s.Finished = r.finished
		out = append(out, s)
	}
	return out, nil
}
