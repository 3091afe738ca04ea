package storetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"backfill/store"
)

func init() { cases = append(cases, surveyCases...) }

// mongoBulkPlus rows take more than one of the MongoDB backend's bulk
// requests (250 documents) and little time on the embedded server.
const mongoBulkPlus = 260

// surveyRows reads every row of survey.
func surveyRows(ctx context.Context, t *testing.T, s store.Store, survey string) []store.SurveyRow {
	t.Helper()
	var out []store.SurveyRow
	if err := s.SurveyRows(ctx, survey, func(r store.SurveyRow) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("SurveyRows(%s): %v", survey, err)
	}
	return out
}

func assertSurveyRows(t *testing.T, got, want []store.SurveyRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d survey rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Survey != w.Survey || g.Key != w.Key || !g.At.Equal(w.At) || string(g.Doc) != string(w.Doc) {
			t.Fatalf("row %d = %s %s %v %s\nwant %s %s %v %s", i, g.Survey, g.Key, g.At, g.Doc, w.Survey, w.Key, w.At, w.Doc)
		}
	}
}

var surveyCases = []testCase{
	{"survey/rows in key order, byte for byte", func(ctx context.Context, t *testing.T, s store.Store) {
		at := time.Date(2026, 3, 1, 9, 30, 0, 123_000_000, time.UTC)
		in := []store.SurveyRow{
			{Survey: "web/1", Key: "b.example", At: at, Doc: []byte(`{"domain":"b.example","status":200,  "server":"nginx/1.25"}`)},
			{Survey: "web/1", Key: "a.example", At: at.Add(time.Second), Doc: []byte(`{"domain":"a.example","x":1.50}`)},
			{Survey: "web/2", Key: "a.example", At: at, Doc: []byte(`{}`)},
		}
		if err := s.PutSurveyRows(ctx, in); err != nil {
			t.Fatal(err)
		}
		assertSurveyRows(t, surveyRows(ctx, t, s, "web/1"), []store.SurveyRow{in[1], in[0]})
		assertSurveyRows(t, surveyRows(ctx, t, s, "web/2"), in[2:])
		if got := surveyRows(ctx, t, s, "web/3"); len(got) != 0 {
			t.Fatalf("an unknown survey has %d rows", len(got))
		}
	}},
	{"survey/upsert replaces, redelivery changes nothing", func(ctx context.Context, t *testing.T, s store.Store) {
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		first := store.SurveyRow{Survey: "ports/1", Key: "127.0.0.1:22", At: at, Doc: []byte(`{"state":"filtered"}`)}
		second := store.SurveyRow{Survey: "ports/1", Key: "127.0.0.1:22", At: at.Add(time.Minute), Doc: []byte(`{"state":"open"}`)}
		for _, r := range []store.SurveyRow{first, second, second} {
			if err := s.PutSurveyRows(ctx, []store.SurveyRow{r}); err != nil {
				t.Fatal(err)
			}
		}
		assertSurveyRows(t, surveyRows(ctx, t, s, "ports/1"), []store.SurveyRow{second})
	}},
	{"survey/bad rows are refused whole", func(ctx context.Context, t *testing.T, s store.Store) {
		good := store.SurveyRow{Survey: "web/1", Key: "ok.example", Doc: []byte(`{}`)}
		for _, bad := range []store.SurveyRow{
			{Survey: "web/1", Key: "", Doc: []byte(`{}`)},
			{Survey: "", Key: "x", Doc: []byte(`{}`)},
			{Survey: "web/1", Key: "x", Doc: []byte(`{"cut`)},
		} {
			if err := s.PutSurveyRows(ctx, []store.SurveyRow{good, bad}); err == nil {
				t.Fatalf("PutSurveyRows accepted %+v", bad)
			}
		}
		if got := surveyRows(ctx, t, s, "web/1"); len(got) != 0 {
			t.Fatalf("a refused batch left %d rows", len(got))
		}
	}},
	{"survey/large batch and awkward keys", func(ctx context.Context, t *testing.T, s store.Store) {
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		var in []store.SurveyRow
		for i := range mongoBulkPlus {
			key := fmt.Sprintf("10.0.%d.%d:443", i/256, i%256)
			in = append(in, store.SurveyRow{Survey: "ports/9", Key: key, At: at, Doc: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		}
		for _, k := range []string{"bücher.example", "a.b$c@d%e", "名前.example"} {
			in = append(in, store.SurveyRow{Survey: "ports/9", Key: k, At: at, Doc: []byte(`{"k":"` + k + `"}`)})
		}
		if err := s.PutSurveyRows(ctx, in); err != nil {
			t.Fatal(err)
		}
		want := append([]store.SurveyRow(nil), in...)
		sort.Slice(want, func(i, j int) bool { return want[i].Key < want[j].Key })
		assertSurveyRows(t, surveyRows(ctx, t, s, "ports/9"), want)
	}},
}
