package survey

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DNS cache bounds: an answer is kept for its TTL, but at least MinTTL (a
// domain with a 30-second TTL is not looked up again on every rescan of a
// big list) and at most MaxTTL.
const (
	DefaultMinTTL = 5 * time.Minute
	DefaultMaxTTL = 24 * time.Hour
)

// dnsCache is the persistent DNS cache in the state: answers that
// resolved, and negative answers (nxdomain, nodata), until their TTL
// (bounded by min and max) expires. Failures (servfail, timeout, refused)
// are not cached: they are asked again next time.
type dnsCache struct {
	st       *state
	min, max time.Duration
}

type cached struct {
	Answer
	At     time.Time
	Cached bool // the answer came from the cache
}

func (c *dnsCache) get(ctx context.Context, name string, now time.Time) (cached, bool, error) {
	var answer, at string
	err := c.st.db.QueryRowContext(ctx, `SELECT answer, at FROM dns WHERE name = ? AND expires > ?`, name, fmtTime(now)).Scan(&answer, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return cached{}, false, nil
	}
	if err != nil {
		return cached{}, false, fmt.Errorf("survey: dns cache: %w", err)
	}
	var a Answer
	if err := json.Unmarshal([]byte(answer), &a); err != nil {
		return cached{}, false, nil // an entry we cannot read is asked again
	}
	t, _ := parseTimeText(at)
	return cached{Answer: a, At: t, Cached: true}, true, nil
}

// put caches a; answers that failed are left out.
func (c *dnsCache) put(ctx context.Context, name string, a Answer, now time.Time) error {
	if a.Class != "" && a.Class != DNSNXDomain && a.Class != DNSNoData {
		return nil
	}
	ttl := min(max(time.Duration(a.TTL)*time.Second, c.min), c.max)
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = c.st.db.ExecContext(ctx, `INSERT INTO dns (name, answer, at, expires) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET answer = excluded.answer, at = excluded.at, expires = excluded.expires`,
		name, string(b), fmtTime(now), fmtTime(now.Add(ttl)))
	if err != nil {
		return fmt.Errorf("survey: dns cache: %w", err)
	}
	return nil
}
