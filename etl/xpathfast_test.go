package etl

import (
	"fmt"
	"strings"
	"testing"
)

var planExprs = []struct {
	expr  string
	plan  bool
	first bool
}{
	{"//h1[@class='fn']", true, false},
	{"//p[@class='location']/text()", true, false},
	{"//ul[@class='sites']//a/@href", true, false},
	{`//div[@class="post"]//a/@href`, true, true},
	{"//div[@class='post']/h3/a", true, false},
	{"//div[@class='box']//span/text()", true, false},
	{"//div[@class='box']/node()", true, false},
	{"//div[@class='box']/*", true, false},
	{"//div[@id='x']/@*", true, false},
	{"//a[@href='/']", true, false},
	{"//p[@class='x'][1]", false, false},
	{"//p[@class='x']/..", false, false},
	{"//p[contains(@class,'x')]", false, false},
	{"//p[@class='x'] | //h1", false, false},
	{"//p[@class='x']/following-sibling::p", false, false},
	{"//div[@class='box']//following-sibling::span", false, false},
	{"//div[@class='box']/span[ancestor::div]", false, false},
	{"//div[@class='box']/span[last()]", false, false},
	// Predicates and sibling axes below the match stay inside it.
	{"//div[@class='profile']/h1[@class='fn']/text()", true, false},
	{"//div[@class='box']//span[1]", true, false},
	{"//div[@class='box']/span[2]/text()", true, true},
	{"//div[@class='box']//span[contains(@class, 'c')]", true, false},
	{"//div[@class='box']/div[@class='box']/span", true, false},
	{"//dl[@class='profile']/dt[normalize-space()='Email']/following-sibling::dd[1]/text()", true, false},
	{"//dl[@class='profile']/dt[text()='Name']/following-sibling::dd", true, false},
	{"//dl[@class='profile']//dd/preceding-sibling::dt[1]", true, false},
	{"//dl[@class='profile']/dt[normalize-space(.)=\"Location\"]//following-sibling::*", true, false},
}

var planPages = []string{
	`<div class=box><span>a</span><div class=box><span>b</span></div><span>c</span></div><div class=box>d<span>e</span></div>`,
	`<div class=box id=x title=t>one</div><p class=x>p</p><p class="x y">q</p><p class=x>r<b>s</b></p>`,
	`<h1 class=fn>A</h1><h1 class=fn>B</h1><h1 class=FN>C</h1><ul class=sites><li><a href=/a>a</a><li><a>no href</a><li><a href=/b>b</a></ul><ul class=sites><li><a href=/c>c</a></ul>`,
	`<svg><a href=/svg class=x>s</a></svg><a href="/">home</a>`,
	`<table><tr><td><div class=box><span>in cell</span></div></table>`,
	`<div class=box><span class="a c">1</span><span class=c>2</span><b>x</b><span>3</span></div><div class=box><span>4</span></div>`,
	`<dl class=profile><dt> Name </dt><dd>Ada</dd><dd>second</dd><dt>Email</dt><dd>ada@x.example</dd><dt>Location</dt><dd>Lisbon</dd></dl><dd>outside</dd>`,
	`<div class=profile><h1 class=fn>Ada</h1><h1 class=fn>Two</h1></div><div class=profile><p><h1 class=fn>in p</h1></div><h1 class=fn>out</h1>`,
}

// TestXPathPlanAgrees: wherever the index answers an expression, it gives
// the values the XPath library gives, in the same order.
func TestXPathPlanAgrees(t *testing.T) {
	pages := append([]string{}, planPages...)
	for _, p := range fixturePages(t) {
		pages = append(pages, string(p))
	}
	for _, c := range planExprs {
		if got := newXPathPlan(c.expr) != nil; got != c.plan {
			t.Errorf("%s: plan %v, want %v", c.expr, got, c.plan)
		}
		for _, page := range pages {
			checkPlan(t, c.expr, c.first, page)
		}
	}
}

func checkPlan(t *testing.T, expr string, first bool, page string) {
	t.Helper()
	params := xpathParams{Expression: expr, First: first}
	planned, err := newXPath(params)
	if err != nil {
		return
	}
	plain, _ := newXPath(params)
	plain.(*xpathProc).plan = nil
	doc := NewDocument("https://site.example/", []byte(page), "text/html")
	got, err1 := planned.Process(doc.docValue(), doc)
	want, err2 := plain.Process(doc.docValue(), doc)
	if fmt.Sprint(err1) != fmt.Sprint(err2) || valuesKey(got) != valuesKey(want) {
		t.Errorf("%s on %q:\nplan    %s %v\nlibrary %s %v", expr, clip(page, 200), valuesKey(got), err1, valuesKey(want), err2)
	}
}

func valuesKey(vs []Value) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "[%q %p]", v.Text, v.Node)
	}
	return b.String()
}

func FuzzXPathPlan(f *testing.F) {
	for _, p := range planPages {
		f.Add(p, 0)
	}
	f.Fuzz(func(t *testing.T, page string, which int) {
		c := planExprs[uint(which)%uint(len(planExprs))]
		checkPlan(t, c.expr, c.first, page)
	})
}

// TestXPathPlanTakesBench: the benchmark's expressions are answered from
// the index, not by the library.
func TestXPathPlanTakesBench(t *testing.T) {
	doc := NewDocument("https://people.example/ada", benchPage(), "text/html")
	for _, expr := range []string{"//ul[@class='sites']//a/@href", "//h1[@class='fn']", "//p[@class='location']/text()", "//p[@class='email']"} {
		x, err := newXPath(xpathParams{Expression: expr})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := x.(*xpathProc).evalPlan(doc)
		if !ok || len(got) == 0 {
			t.Errorf("%s: plan gave %v, ok %v", expr, got, ok)
		}
	}
}
