package dispatcher

import "testing"

func TestResultCache(t *testing.T) {
	var c resultCache
	a := []byte(`{"s":"https://a.example/p","l":["https://a.example/q"]}`)
	b := []byte(`{"s":"https://a.example/p2"}`)
	steps := []struct {
		key        int64
		blob       []byte
		wantSource string
		same       int // index of an earlier step whose result must be returned again, or -1
	}{
		{1, a, "https://a.example/p", -1},
		{1, append([]byte(nil), a...), "https://a.example/p", 0}, // same bytes, another slice
		{1, b, "https://a.example/p2", -1},                       // the page crawled again
		{2, a, "https://a.example/p", -1},                        // another URL
	}
	var got []*cachedResult
	for i, s := range steps {
		res, err := c.decode(s.key, s.blob)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if res.Source != s.wantSource {
			t.Errorf("step %d: source %q, want %q", i, res.Source, s.wantSource)
		}
		for j, prev := range got {
			if (prev == res) != (j == s.same) {
				t.Errorf("step %d: shares the result of step %d: %v, want %v", i, j, prev == res, j == s.same)
			}
		}
		got = append(got, res)
	}
	if _, err := c.decode(3, []byte(`{"s":`)); err == nil {
		t.Error("a truncated cached result decoded without an error")
	}
	for i := range resultCacheCap + 1 {
		if _, err := c.decode(int64(100+i), a); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > resultCacheCap {
		t.Errorf("cache holds %d results, cap %d", len(c.m), resultCacheCap)
	}
}
