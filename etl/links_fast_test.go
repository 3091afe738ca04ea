package etl

import (
	"fmt"
	"net/url"
	"testing"
)

var fastBases = []string{
	"https://people.example/ada",
	"http://Shop.Example:80/a/b/?q=1#x",
	"https://shop.example:8443/dir/page.html",
	"https://user:pw@shop.example/",
	"http://[::1]:8080/x",
	"https://Bücher.example/a",
}

var fastHrefs = []string{
	"/", "/posts/1", "/a/b/c.html", "/a//b", "/a/./b", "/a/../b", "/.well-known/x", "/a/b/..",
	"/search?q=go&page=2", "/s?", "/s?a=%20b", "/s?q=a b", "/p#top", "/p#a#b", "/p#%zz", "/p?x#y",
	"/caf\u00e9", "/a%2Fb", "/A/B_C-D~E", "/x?y=(1)*2;z=@:/?", "/x?y='q'",
	"https://other.example", "https://other.example/", "http://other.example?x", "https://other.example#f",
	"https://Other.example/x", "https://other.example:443/x", "https://u@other.example/", "https://other.example./x",
	"https://a..b/x", "https://-a-.example/x", "https://other.example/a/./b", "https://other.example/\u00e9",
	"http://", "https:///x", "HTTP://other.example/", "//cdn.example/x", "rel/ative", "?q", "#frag",
	"mailto:a@b.example", "javascript:void(0)", " /padded ", "/tab\tbed", "/new\nline",
	"https://xn--bcher-kva.example/a", "https://xn--zz.example/a", "https://a.xn--zz/a", "https://axn--zz.example/a", "https://bücher.example/a",
	"/f.pdf", "/f.PDF?x=1", "/f.html?x=a.pdf", "/d.zip/", "/p#x.png", "https://files.example/a.tar.gz", "https://x.pdf", "https://x.pdf?a.pdf",
}

// TestFastResolveAgrees checks that the fast path of Document.resolve
// gives exactly what the general resolveURL gives, wherever it applies.
func TestFastResolveAgrees(t *testing.T) {
	fast := 0
	for _, b := range fastBases {
		for _, h := range fastHrefs {
			if checkFastResolve(t, b, h) {
				fast++
			}
		}
	}
	if fast < 40 {
		t.Errorf("the fast path took only %d cases", fast)
	}
}

func checkFastResolve(t *testing.T, base, href string) (tookFast bool) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	d := &Document{URL: u, Base: u}
	got, pathEnd, ok := d.fastResolvePath(href)
	if !ok {
		return false
	}
	if bin := binaryPath(got[:pathEnd]); bin != IsBinaryURL(got) {
		t.Errorf("base %q href %q: %q up to its path end %q is binary %v, IsBinaryURL says %v", base, href, got, got[:pathEnd], bin, !bin)
	}
	want, err := resolveURL(u, href)
	if err != nil {
		t.Errorf("base %q href %q: fast path gave %q, general path refuses it: %v", base, href, got, err)
	} else if got != want {
		t.Errorf("base %q href %q: fast path %q, general path %q", base, href, got, want)
	}
	return true
}

func FuzzFastResolve(f *testing.F) {
	for _, h := range fastHrefs {
		f.Add("https://people.example/ada", h)
	}
	f.Fuzz(func(t *testing.T, base, href string) {
		u, err := url.Parse(base)
		if err != nil || !u.IsAbs() {
			return
		}
		checkFastResolve(t, base, href)
	})
}

// TestStringSet: the set outLinks dedupes with says what a map says, reused
// across pages of every size.
func TestStringSet(t *testing.T) {
	var set stringSet
	for _, n := range []int{0, 1, 7, 8, 9, 100, 3000, 5} {
		set.reset(n)
		want := map[string]bool{}
		for i := range n {
			// Repeats, and strings that differ only at the end.
			s := fmt.Sprintf("https://a.example/%d", i%(n/3+1))
			_, had := want[s]
			want[s] = true
			if got := set.add(s); got == had {
				t.Fatalf("n=%d: add(%q) = %v, set had it: %v", n, s, got, had)
			}
		}
		if n > 1 && len(want) == n {
			t.Fatalf("n=%d: the test has no repeats", n)
		}
	}
}
