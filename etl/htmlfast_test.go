package etl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// dumpTree writes every node with its type, name, attributes and data, one
// per line and indented by depth, so that two trees compare equal only if
// they have the same nodes: unlike rendering, it tells one text node from
// two adjacent ones.
func dumpTree(n *html.Node) string {
	var b strings.Builder
	var rec func(n *html.Node, depth int)
	rec = func(n *html.Node, depth int) {
		fmt.Fprintf(&b, "%s%d %q %d %q", strings.Repeat(" ", depth), n.Type, n.Data, n.DataAtom, n.Namespace)
		for _, at := range n.Attr {
			fmt.Fprintf(&b, " [%q %q %q]", at.Namespace, at.Key, at.Val)
		}
		b.WriteByte('\n')
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Parent != n {
				b.WriteString("BAD PARENT\n")
			}
			rec(c, depth+1)
		}
	}
	rec(n, 0)
	return b.String()
}

func render(n *html.Node) string {
	var b strings.Builder
	if err := html.Render(&b, n); err != nil {
		return "render error: " + err.Error()
	}
	return b.String()
}

// collectPlan has the fast parser collect elements of tags with an atom and
// without.
var collectPlan = newScanPlan([]string{"a", "div", "p", "li", "td", "span", "b", "my-widget", "x-y", "dív", "meta", "script"})

// checkFastParse parses page both ways; where the fast path takes the
// page, its tree must render byte for byte as html.Parse's and have the
// same nodes. It reports whether the fast path took the page.
func checkFastParse(t *testing.T, page []byte) bool {
	t.Helper()
	fast, ar, ok := fastParseArena(page, string(page), collectPlan)
	if !ok {
		return false
	}
	// What the parser collected for Document.scan is what a walk of the
	// tree finds, in document order.
	var hrefs []anchor
	var special []*html.Node
	lists := make([][]*html.Node, len(collectPlan.tags))
	walk(fast, func(n *html.Node) bool {
		if n.Type != html.ElementNode {
			return true
		}
		for i, tag := range collectPlan.tags {
			if n.Data == tag {
				lists[i] = append(lists[i], n)
			}
		}
		switch n.DataAtom {
		case atom.A, atom.Area:
			if h, ok := hrefOf(n); ok {
				hrefs = append(hrefs, anchor{h, n})
			}
		case atom.Meta, atom.Script:
			special = append(special, n)
		}
		return true
	})
	if !slices.Equal(ar.hrefs, hrefs) || !slices.Equal(ar.special, special) {
		t.Fatalf("the parser collected %d hrefs and %d meta/script elements, the tree has %d and %d, on %q",
			len(ar.hrefs), len(ar.special), len(hrefs), len(special), clip(string(page), 300))
	}
	for i, tag := range collectPlan.tags {
		if !slices.Equal(ar.tagLists[i], lists[i]) {
			t.Fatalf("the parser collected %d %s elements, the tree has %d, on %q", len(ar.tagLists[i]), tag, len(lists[i]), clip(string(page), 300))
		}
	}
	std, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("html.Parse fails (%v) where the fast path succeeds on %q", err, clip(string(page), 300))
	}
	if got, want := render(fast), render(std); got != want {
		t.Fatalf("rendering differs on %q\nfast: %q\nstd:  %q", clip(string(page), 300), clip(got, 2000), clip(want, 2000))
	}
	if got, want := dumpTree(fast), dumpTree(std); got != want {
		t.Fatalf("tree differs on %q\nfast:\n%s\nstd:\n%s", clip(string(page), 300), got, want)
	}
	return true
}

// testwebLikePage has the shape of the pages the test web serves.
func testwebLikePage() []byte {
	return []byte("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Erin &amp; co</title>\n</head>\n<body>\n" +
		"<header><a href=\"/\">staff.example.org</a></header>\n<div class=\"profile\">\n  <h1 class=\"fn\">\n    Erin Example\n  </h1>\n" +
		"  <p class=\"location\">Oslo</p>\n  <p>Write to <a class=\"email\" href=\"mailto:erin@staff.example.org\">erin@staff.example.org</a></p>\n" +
		"<ul class=\"links\">\n  <li><a href=\"/private/erin.html\">Home address (staff only)</a></li>\n</ul>\n</div>\n</body>\n</html>\n")
}

// fixturePages are the pages the fast path must take: the benchmark page
// and every bundled page.
func fixturePages(t testing.TB) map[string][]byte {
	pages := map[string][]byte{"bench": benchPage(), "testweb-like": testwebLikePage()}
	for _, glob := range []string{"testdata/pages/*.html", "testdata/mappings/*.html", "testdata/update/*.html", "../mappings/testdata/*.html"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pages[f] = b
		}
	}
	return pages
}

// TestFastParseTakesFixtures: the fast path is only worth having if it
// takes real pages, and it must agree with html.Parse on them.
func TestFastParseTakesFixtures(t *testing.T) {
	pages := fixturePages(t)
	if len(pages) < 6 {
		t.Fatalf("only %d fixture pages found", len(pages))
	}
	for name, page := range pages {
		if !checkFastParse(t, page) {
			t.Errorf("%s: the fast path fell back to html.Parse", name)
		}
	}
}

// fastCases are tricky inputs: each must either match html.Parse or fall
// back; fast says which the test expects, so that a case silently moving
// to the fallback (or a bail-out being lost) shows.
var fastCases = []struct {
	name string
	in   string
	fast bool
}{
	{"empty", "", true},
	{"text only", "hello", true},
	{"whitespace only", " \n\t ", true},
	{"doctype", "<!DOCTYPE html><title>x</title>", true},
	{"doctype upper html", "<!DOCTYPE HTML><p>x<table><tr><td>1</table>", true},
	{"doctype legacy", `<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><p>x<table></table>`, true},
	{"doctype quirks", `<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN"><p>x<table></table>`, true},
	{"no doctype table in p", "<p>x<table><tr><td>1</td></tr></table>", true},
	{"implied everything", "<title>t</title><p>a<p>b", true},
	{"head whitespace", "<html> <head> <meta charset=utf-8> </head> <body> x </body> </html> ", true},
	{"text in head", "<head><title>t</title> hello <p>x", true},
	{"meta after head", "<head></head>\n<meta name=a content=b><script>var x=1</script><body>", true},
	{"comments everywhere", "<!--a--><html><!--b--><head><!--c--></head><!--d--><body><!--e--></body><!--f--></html><!--g-->", true},
	{"after body text", "<body><p>x</p></body>\n</html>\n", true},
	{"after body content", "<body>x</body>y<p>z", true},
	{"void elements", "<p>a<br>b<img src=x.png alt='a b'><input type=text><hr><wbr>c", true},
	{"self closing", "<div/><br/><img src=x /><p/>x", true},
	{"raw text", "<script>if (a < b && c > d) { x = '</p>' }</script><style>p > a { color: red }</style>", true},
	{"script escape", "<script><!-- document.write('</script>') --></script>x", false},
	{"rcdata", "<title>a &amp; b <b>c</b></title><textarea>\nline &lt;1&gt;\n</textarea>", true},
	{"textarea crlf", "<textarea>\r\nx\r\ny</textarea>", true},
	{"pre newline", "<pre>\n\nx</pre><pre>\ny</pre><listing>\nz</listing>", true},
	{"pre charref newline", "<pre>&#10;x</pre>", true},
	{"char refs", "<p>&amp; &lt; &gt; &quot; &nbsp; &copy &copyright; &notit; &#65; &#x42; &#0; &#x110000; &unknown; &</p>", true},
	{"attr refs", `<a href="?a=1&b=2&amp;c=3&copy=4&copy;&notit&amp=5&lt5&semi;&ampx;&fjlig;" title=&quot;x&quot;>l</a>`, true},
	{"attr forms", `<div a b=1 c = "2" d='3' e=4/ f=/x/ g=""h i=x=y j=>k</div><p/ x=1>`, true},
	{"attr duplicate", `<div class=a CLASS=b id=x Id=y>t</div>`, true},
	{"attr upper", `<DIV CLASS="A" Data-X=Y>t</DIV>`, true},
	{"attr equals first", `<div =a b=c>t</div>`, true},
	{"attr slash", `<div / a=1 // b=2 />t</div>`, true},
	{"lists", "<ul><li>a<li>b<ul><li>c</ul><li>d</ul><ol><li><p>x<li>y</ol>", true},
	{"dl", "<dl><dt>a<dd>b<dt>c<dd>d<div><dt>e</div></dl>", true},
	{"p implied", "<p>a<div>b</div><p>c<h1>d</h1><p>e<ul><li>f</ul><p>g</p></p>", true},
	{"headings", "<h1>a<h2>b</h3>c</h1>", true},
	{"tables", "<table><caption>c</caption><colgroup><col><col></colgroup><thead><tr><th>h</thead><tr><td>1<td>2<tr><td>3</table>", true},
	{"table whitespace", "<table>\n <tr>\n  <td>a</td>\n </tr>\n</table>", true},
	{"table col only", "<table><col><tr><td>1</table>", true},
	{"table foster text", "<table>x<tr><td>1</table>", false},
	{"table foster element", "<table><div>x</div><tr><td>1</table>", false},
	{"table nested", "<table><tr><td><table><tr><td>in</table></td><td>out</table>", true},
	{"table hidden input form", "<table><form><input type=hidden name=a><tr><td>x</table>", true},
	{"table script", "<table><script>x</script><tr><td>1</table>", true},
	{"table in table", "<table><tr><td>1<table><tr><td>2</table></table>", true},
	{"table end tags", "<table><tr><td>a</span></div></td></tr></table>", true},
	{"table stray end", "<table></div><tr><td>1</table>", true},
	{"table p end", "<table></p><tr><td>1</table>", false},
	{"formatting", "<b>bold <i>both</i></b> <a href=x>link</a> <em>e</em><strong>s</strong>", true},
	{"formatting reconstruct", "<p><b>x</p>y</b>w<p><i>z</p><p>v", true},
	{"formatting reconstruct block", "<p><b>x</p>y<p>z</b>w", false},
	{"formatting noah", "<b><b><b><b>x</b></b></b></b><p>y", true},
	{"formatting attrs sorted", `<a title=t href=h class=c>x</a><b z=1 a=2>y</b>`, true},
	{"formatting unclosed in cell", "<table><tr><td><b>x</td><td>y</table>z", true},
	{"formatting over block", "<b><div>x</b>y</div>", false},
	{"nested a", "<a href=1>x<a href=2>y</a>", false},
	{"formatting misnested inline", "<b><i>x</b>y</i>", true},
	{"span end other", "<div><span>a</div>b</span>", true},
	{"unknown elements", "<my-widget data-x=1><x-y>t</x-y></my-widget></unknown>", true},
	{"select", "<select><option>a<option selected>b<optgroup label=g><option>c</select><input>", true},
	{"option outside select", "<option>a<option>b<p>c", true},
	{"form pointer", "<form id=a><form id=b><input></form></form><form><div></form>x</div>", true},
	{"button nested", "<button>a<button>b</button>", true},
	{"ruby", "<ruby>a<rp>(<rt>b<rp>)</ruby>", true},
	{"image", "<image src=x>", true},
	{"html attrs", "<html a=1><body b=2><html c=3 a=9><body d=4>x", true},
	{"br end", "<p>a</br>b", true},
	{"p end without p", "<div></p></div>", true},
	{"iframe noscript", "<iframe src=x><p>not parsed</p></iframe><noscript><img src=y></noscript><noembed>n</noembed><xmp>a<b</xmp>", true},
	{"noscript head", "<head><noscript><link rel=x></noscript></head>", true},
	{"object", "<object><b>x</object>y", true},
	{"bogus comments", "<?xml version=\"1.0\"?><!x><![CDATA[c]]><p>x", true},
	{"comment forms", "<!----><!-- a -- b --><!-- a --->x", true},
	{"comment abrupt", "<!-->x", false},
	{"comment bang", "<!-- a --!>x", false},
	{"comment unterminated", "<p><!-- x", false},
	{"comment charref", "<!-- &amp; -->", true},
	{"lt in text", "a < b <3 <= c <", true},
	{"end tag attrs", "<div>x</div class=a>", true},
	{"close bracket", "<p>x</>y", false},
	{"end tag bogus", "<p>x</ y>", false},
	{"tag at eof", "<p>x<div cl", false},
	{"crlf", "<p\r\nclass=a>x\r\ny\rz</p>", true},
	{"nul", "<p>a\x00b</p>", false},
	{"svg", "<svg><circle/></svg>", false},
	{"math", "<math><mi>x</mi></math>", false},
	{"template", "<template><p>x</p></template>", false},
	{"frameset", "<frameset><frame></frameset>", false},
	{"plaintext", "<plaintext><p>x", false},
	{"nobr", "<nobr>x</nobr>", false},
	{"script eof", "<script>x", false},
	{"raw end tag case", "<SCRIPT>x</Script >y<STYLE>z</STYLE/>", true},
	{"title attr raw", "<title a=1>x</title b=2>", true},
	{"body attrs twice", "<body class=a><p>x</p><body id=b class=c>", true},
	{"deep nesting", strings.Repeat("<div>", 600), false},
	{"many texts merged", "a</x>b</y>c<head>d", true},
	{"non-ascii names", "<dív clåss=x>y</dív>", true},
	{"upper tags", "<HTML><HEAD><TITLE>T</TITLE></HEAD><BODY><P>X</BODY></HTML>", true},
	{"doctype later", "<p>x<!DOCTYPE html>y", true},
	{"doctype empty name", "<!DOCTYPE>x", true},
	{"doctype amp", "<!DOCTYPE &amp;>x", false},
	{"end tags close top", "<div><p>a</p></div><h2>b</h2><ul><li>c</li></ul><dl><dt>d</dt><dd>e</dd></dl><section><pre>f</pre></section><button>g</button>", true},
	{"formatting end closes top", "<p><a href=x>a</a><b>b</b><i><em>c</em></i><code>d</code></p>", true},
	{"formatting end twice", "<b><b>x</b>y</b>z", true},
	{"formatting end behind marker", "<b><object><b>x</b></object>y</b>", true},
	{"formatting end after reconstruct", "<p><i>x</p><b>y</b>z</i>", true},
	{"heading end other level", "<h1>a</h2>b", true},
	{"end tag under other top", "<div><span>x</div>y<ul><li><b>z</ul>", true},
}

func TestFastParseCases(t *testing.T) {
	for _, c := range fastCases {
		t.Run(c.name, func(t *testing.T) {
			if got := checkFastParse(t, []byte(c.in)); got != c.fast {
				t.Errorf("fast path took it: %v, want %v", got, c.fast)
			}
		})
	}
}

// FuzzFastParse holds the fast path to html.Parse: whenever it takes an
// input, the tree must render byte for byte the same and have the same
// nodes.
func FuzzFastParse(f *testing.F) {
	for _, page := range fixturePages(f) {
		f.Add(page)
	}
	for _, c := range fastCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		checkFastParse(t, page)
	})
}
