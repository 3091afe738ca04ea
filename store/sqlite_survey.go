package store

import (
	"context"
	"database/sql"
	"fmt"
)

func (s *sqliteStore) PutSurveyRows(ctx context.Context, rows []SurveyRow) error {
	if err := checkSurveyRows(rows); err != nil {
		return err
	}
	ats := make([]string, len(rows))
	for i, r := range rows {
		at, err := formatTime(r.At)
		if err != nil {
			return fmt.Errorf("store: put survey rows: %s %s: %w", r.Survey, r.Key, err)
		}
		ats[i] = at
	}
	return s.write(ctx, fmt.Sprintf("put %d survey rows", len(rows)), func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO survey_rows (survey, key, at, doc) VALUES (?, ?, ?, ?)
			ON CONFLICT (survey, key) DO UPDATE SET at = excluded.at, doc = excluded.doc`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, r := range rows {
			if _, err := stmt.ExecContext(ctx, r.Survey, r.Key, ats[i], string(r.Doc)); err != nil {
				return fmt.Errorf("%s %s: %w", r.Survey, r.Key, err)
			}
		}
		return nil
	})
}

func (s *sqliteStore) SurveyRows(ctx context.Context, survey string, fn func(SurveyRow) error) error {
	rows, err := s.r.QueryContext(ctx, `SELECT key, at, doc FROM survey_rows WHERE survey = ? ORDER BY key`, survey)
	if err != nil {
		return fmt.Errorf("store: survey rows of %s: %w", survey, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, at, doc string
		if err := rows.Scan(&key, &at, &doc); err != nil {
			return fmt.Errorf("store: survey rows of %s: %w", survey, err)
		}
		t, err := parseTime(at)
		if err != nil {
			return fmt.Errorf("store: survey row %s %s: column at: %w", survey, key, err)
		}
		if err := fn(SurveyRow{Survey: survey, Key: key, At: t, Doc: []byte(doc)}); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: survey rows of %s: %w", survey, err)
	}
	return nil
}
