package dispatcher

import (
	"bytes"
	"encoding/json"
)

// resultCacheCap bounds the cached extractions kept decoded. A page many
// records reach (a team page, a colleague's profile) is applied to each
// of them from the seen store, and decoding its JSON once per record was
// a good part of applying it.
const resultCacheCap = 4096

// resultCache holds cached extractions decoded, by URL key, with the
// bytes they were decoded from: an entry serves only the same bytes, so a
// page crawled again (new bytes) is decoded anew and nothing needs
// invalidating. The decoded results are shared and never changed.
type resultCache struct {
	m map[int64]decodedResult
}

type decodedResult struct {
	blob []byte
	res  *cachedResult
}

// decode returns blob, the seen store's cached result of the URL key,
// decoded.
func (c *resultCache) decode(key int64, blob []byte) (*cachedResult, error) {
	if e, ok := c.m[key]; ok && bytes.Equal(e.blob, blob) {
		return e.res, nil
	}
	res := new(cachedResult)
	if err := json.Unmarshal(blob, res); err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= resultCacheCap {
		c.m = make(map[int64]decodedResult)
	}
	c.m[key] = decodedResult{blob: blob, res: res}
	return res, nil
}
