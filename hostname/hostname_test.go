package hostname

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestASCII(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: "example.org", want: "example.org"},
		{in: "WWW.Example.ORG", want: "www.example.org"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "BÜCHER.Example", want: "xn--bcher-kva.example"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "XN--BCHER-KVA.example", want: "xn--bcher-kva.example"},
		{in: "bücher.example.", want: "xn--bcher-kva.example."},
		{in: "faß.de", want: "xn--fa-hia.de"}, // not transitional: ß is not "ss"
		{in: "ＥＸＡＭＰＬＥ.com", want: "example.com"},
		{in: "例え.テスト", want: "xn--r8jz45g.xn--zckzah"},
		{in: "bücher。example", want: "xn--bcher-kva.example"},
		{in: "r4---sn-abc.video.example", want: "r4---sn-abc.video.example"},
		{in: "my_host.example", want: "my_host.example"},
		{in: "127.0.0.1", want: "127.0.0.1"},
		{in: "::1", want: "::1"},
		{in: "[2001:DB8::1]", want: "[2001:db8::1]"},
		{in: "xn--zz.example", bad: true},   // not punycode
		{in: "xn--a.example", bad: true},    // decodes to a control character
		{in: "xn--.example", bad: true},     // decodes to nothing
		{in: "x\u200dy.example", bad: true}, // a joiner out of context
		{in: "bücher..example", bad: true},  // an empty label
		{in: "\u05d0a.example", bad: true},  // bidi rule: right-to-left then left-to-right
		{in: "xn--ls8h.example", want: "xn--ls8h.example"},
	}
	for _, tc := range cases {
		got, err := ASCII(tc.in)
		if tc.bad {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
				t.Errorf("ASCII(%q) = %q, %v; want an ErrInvalid naming it", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ASCII(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzASCII: whatever the input, ASCII does not panic, and what it returns
// is ASCII, has no upper case, and is its own ASCII form.
func FuzzASCII(f *testing.F) {
	for _, s := range []string{"example.org", "Bücher.Example", "xn--bcher-kva.example", "xn--zz", "r4---sn-x.example", "[::1]", "例え.テスト", "a..b", "xn--.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		got, err := ASCII(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ASCII(%q): %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		for i := 0; i < len(got); i++ {
			if got[i] >= 0x80 || ('A' <= got[i] && got[i] <= 'Z') {
				t.Fatalf("ASCII(%q) = %q: not lower-case ASCII", in, got)
			}
		}
		again, err := ASCII(got)
		if err != nil || again != got {
			t.Fatalf("ASCII(%q) = %q, but ASCII(%q) = %q, %v", in, got, got, again, err)
		}
	})
}
