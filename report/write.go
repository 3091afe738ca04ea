package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"time"

	"backfill/survey"
	"backfill/wire"
)

//go:embed report.html.tmpl
var pageText string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":     func(a, b int) string { return fmt.Sprintf("%.1f", pct(a, b)) },
	"seconds": func(s float64) string { return fmt.Sprintf("%.2f", s) },
	"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}).Parse(pageText))

// view is the template's input: the Data and its charts.
type view struct {
	*Data
	CompleteChart, RateChart, FailureBars, RobotsBars, FieldBars template.HTML
	SurveyCharts                                                 []surveyView
}

// surveyView is one host survey's part: its outcomes (web) or port
// states (ports), and the top Server products (web) or open ports.
type surveyView struct {
	*survey.Summary
	Outcomes, Top           template.HTML
	OutcomesTitle, TopTitle string
}

func surveyCounts(cs []survey.Count) []Count {
	out := make([]Count, len(cs))
	for i, c := range cs {
		out[i] = Count{Name: c.Name, N: int64(c.N)}
	}
	return out
}

// Write renders d as one self-contained HTML page.
func Write(w io.Writer, d *Data) error {
	v := view{Data: d}
	tl := d.History.Timeline
	complete := series{Name: "complete", Class: "line"}
	partial := series{Name: "partial", Class: "line2"}
	total := series{Name: "records", Class: "total"}
	rate := series{Name: "pages/s", Class: "line"}
	j := 0 // the sample rates are measured from: at least a second back
	for i, s := range tl {
		complete.At, complete.V = append(complete.At, s.At), append(complete.V, float64(s.Complete))
		partial.At, partial.V = append(partial.At, s.At), append(partial.V, float64(s.Partial))
		total.At, total.V = append(total.At, s.At), append(total.V, float64(s.Records))
		if dt := s.At.Sub(tl[j].At).Seconds(); i > 0 && dt >= 1 {
			rate.At = append(rate.At, s.At)
			rate.V = append(rate.V, float64(max(0, s.Pages-tl[j].Pages))/dt)
			j = i
		}
	}
	v.CompleteChart = lineChart("records complete over time", []series{total, partial, complete},
		func(f float64) string { return fmt.Sprintf("%.0f", f) })
	v.RateChart = lineChart("pages per second over time", []series{rate},
		func(f float64) string { return fmt.Sprintf("%.1f/s", f) })
	v.FailureBars = barChart("failures by class", d.Failures)
	v.RobotsBars = barChart("robots.txt outcomes", d.Robots)
	fields := make([]Count, len(d.Fields))
	for i, f := range d.Fields {
		fields[i] = Count{Name: f.Field + " (%)", N: int64(pct(f.Filled, f.Needed) + 0.5)}
	}
	v.FieldBars = barChart("fill rate per field", fields)
	for _, s := range d.Surveys {
		sv := surveyView{Summary: s}
		switch s.Job {
		case wire.SurveyWeb:
			sv.OutcomesTitle, sv.TopTitle = "domains by outcome", "top Server products"
			outcomes := map[string]int64{}
			for k, n := range s.Outcomes {
				outcomes[k] = int64(n)
			}
			for k, n := range s.Classes {
				outcomes[k] = int64(n) // "outcome/class" of the rows not answered
			}
			sv.Outcomes = barChart(sv.OutcomesTitle, counts(outcomes))
			sv.Top = barChart(sv.TopTitle, surveyCounts(s.Servers))
		case wire.SurveyPorts:
			sv.OutcomesTitle, sv.TopTitle = "ports by state", "open ports"
			states := map[string]int64{}
			for k, n := range s.States {
				states[k] = int64(n)
			}
			sv.Outcomes = barChart(sv.OutcomesTitle, counts(states))
			sv.Top = barChart(sv.TopTitle, surveyCounts(s.OpenPorts))
		}
		v.SurveyCharts = append(v.SurveyCharts, sv)
	}
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
