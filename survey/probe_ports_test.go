package survey

import "testing"

// A banner grab stops at the end of the greeting instead of waiting out
// the banner time.
func TestBannerDone(t *testing.T) {
	for _, c := range []struct {
		banner string
		web    bool
		done   bool
	}{
		{"", false, false},
		{"SSH-2.0-OpenSSH_9.6", false, false},
		{"SSH-2.0-OpenSSH_9.6\r\n", false, true},
		{"220-mail.example ESMTP\r\n", false, false}, // more lines follow
		{"220-mail.example ESMTP\r\n220-no UCE\r\n", false, false},
		{"220-mail.example ESMTP\r\n220 ready\r\n", false, true},
		{"+OK POP3 ready\n", false, true},
		{"HTTP/1.0 200 OK\r\nServer: x\r\n", true, false},
		{"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n", true, true},
		{"HTTP/1.0 200 OK\nServer: x\n\n", true, true},
	} {
		if got := bannerDone([]byte(c.banner), c.web); got != c.done {
			t.Errorf("bannerDone(%q, web %v) = %v, want %v", c.banner, c.web, got, c.done)
		}
	}
}
