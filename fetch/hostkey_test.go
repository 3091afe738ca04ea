package fetch

import (
	"net/url"
	"testing"
)

func TestHostKey(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://Example.ORG/a", "example.org"},
		{"http://example.org:80/a", "example.org"},
		{"https://example.org:443/a", "example.org"},
		{"https://example.org:80/a", "example.org:80"},
		{"http://example.org:8080/a", "example.org:8080"},
		{"http://[::1]:80/", "[::1]"},
		{"http://[::1]:8080/", "[::1]:8080"},
		// Both spellings of a host are one host.
		{"http://Bücher.example/a", "xn--bcher-kva.example"},
		{"http://xn--bcher-kva.example:80/a", "xn--bcher-kva.example"},
		{"https://bücher.example:8443/a", "xn--bcher-kva.example:8443"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostKey(u); got != c.want {
			t.Errorf("HostKey(%s) = %q, want %q", c.url, got, c.want)
		}
	}
}
