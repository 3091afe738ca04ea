package fetch

import "testing"

// TestRefusalOf: the kind a refusal's text names is the one whose flag
// lifts it; the rest is "other", which no flag lifts.
func TestRefusalOf(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"address of localhost:80 refused: 127.0.0.1 (loopback)", RefusedLoopback},
		{"address of a.example:80 refused: ::1 (loopback), 10.0.0.1 (private)", RefusedLoopback},
		{"address of b.example:443 refused: 10.1.2.3 (private)", RefusedPrivate},
		{"address of c.example:80 refused: 100.64.0.1 (shared (CGNAT))", RefusedPrivate},
		{"address of d.example:80 refused: 169.254.169.254 (link-local)", RefusedOther},
		{`unqualified host name "intranet" refused`, RefusedOther},
		{"address of e.example:80 refused: 203.0.113.9 (on the deny list (203.0.113.0/24))", RefusedOther},
		{"", RefusedOther},
	} {
		if got := RefusalOf(c.msg); got != c.want {
			t.Errorf("RefusalOf(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
