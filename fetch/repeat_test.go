package fetch

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A request goes out once, whatever its connection does: these cases
// count the request heads a real server on loopback reads.

// TestNoResendOnReusedConn: the server answers the first request on a
// kept-alive connection, reads the second and closes without answering.
// It sees that second request exactly once and the caller gets a
// classified error. The control sends requests the transport may resend
// (as net/http's defaults do): the server sees the second request twice,
// and Stats counts the repeat, so the count is seen to work.
func TestNoResendOnReusedConn(t *testing.T) {
	cases := []struct {
		name         string
		resend       bool
		wantRequests int32
		wantRepeated int64
		wantClass    Class
	}{
		{name: "unreplayable", wantRequests: 2, wantRepeated: 0, wantClass: ClassProtocol},
		{name: "replayable control", resend: true, wantRequests: 3, wantRepeated: 1, wantClass: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeak(t)
			addr, ex := newKeepAliveServer(t, func(n int, c net.Conn, _ <-chan struct{}) bool {
				if n == 2 {
					return false // read, never answered
				}
				_, err := c.Write([]byte(okResponse("<p>page</p>")))
				return err == nil
			})
			cfg := baseConfig()
			u := site(&cfg, addr)
			f := New(cfg)
			f.resend = tc.resend
			defer f.Close()
			if _, err := f.Get(context.Background(), u+"/one"); err != nil {
				t.Fatalf("first request: %v", err)
			}
			_, err := f.Get(context.Background(), u+"/two")
			if got := ClassOf(err); got != tc.wantClass {
				t.Errorf("second request: class %q (%v), want %q", got, err, tc.wantClass)
			}
			if err != nil && !strings.Contains(err.Error(), "connection closed before the response") {
				t.Errorf("second request: %v, want the early close named", err)
			}
			if got := ex.requests.Load(); got != tc.wantRequests {
				t.Errorf("server read %d requests, want %d", got, tc.wantRequests)
			}
			if got := f.Stats().Repeated; got != tc.wantRepeated {
				t.Errorf("Stats().Repeated = %d, want %d", got, tc.wantRepeated)
			}
		})
	}
}

// TestIdleConnOutlivesIdleTimeout: a kept-alive connection left idle for
// longer than IdleTimeout carries the next request, which goes out once.
func TestIdleConnOutlivesIdleTimeout(t *testing.T) {
	noLeak(t)
	addr, ex := newKeepAliveServer(t, func(_ int, c net.Conn, _ <-chan struct{}) bool {
		_, err := c.Write([]byte(okResponse("<p>page</p>")))
		return err == nil
	})
	cfg := baseConfig()
	cfg.IdleTimeout = 200 * time.Millisecond
	u := site(&cfg, addr)
	f := New(cfg)
	defer f.Close()
	for i, path := range []string{"/one", "/two"} {
		if i > 0 {
			time.Sleep(3 * cfg.IdleTimeout) // the case: the connection idles past the limit
		}
		if _, err := f.Get(context.Background(), u+path); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if r, c := ex.requests.Load(), ex.conns.Load(); r != 2 || c != 1 {
		t.Errorf("server read %d requests on %d connections, want 2 on 1", r, c)
	}
	if got := f.Stats().Repeated; got != 0 {
		t.Errorf("Stats().Repeated = %d, want 0", got)
	}
}

// TestSlowAnswerNotRepeated is a slow site at a host's delay: the second
// request goes out after the connection idled for most of IdleTimeout,
// and the server is silent for a while before answering, then sends its
// body in bytes spaced well within IdleTimeout, for longer than
// IdleTimeout in all. Deadlines that started when the connection went
// idle ended during the silence, and the transport sent the request
// again on a new connection while the first was being answered; deadlines
// that start with the request let the answer finish, requested once.
func TestSlowAnswerNotRepeated(t *testing.T) {
	noLeak(t)
	const (
		idle    = time.Second
		gap     = 800 * time.Millisecond // between the first answer and the second request
		silence = 600 * time.Millisecond // before the second answer's first byte
		step    = 200 * time.Millisecond // between its body's bytes
	)
	body := strings.Repeat("x", 10)
	addr, ex := newKeepAliveServer(t, func(n int, c net.Conn, done <-chan struct{}) bool {
		if n == 1 {
			_, err := c.Write([]byte(okResponse("<p>first</p>")))
			return err == nil
		}
		select {
		case <-done:
			return false
		case <-time.After(silence): // the site's slowness
		}
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n\r\n")); err != nil {
			return false
		}
		return trickle(c, done, body, step)
	})
	cfg := baseConfig()
	cfg.IdleTimeout = idle
	cfg.HeaderTimeout = 5 * time.Second
	cfg.Timeout = 10 * time.Second
	u := site(&cfg, addr)
	f := New(cfg)
	defer f.Close()
	if _, err := f.Get(context.Background(), u+"/one"); err != nil {
		t.Fatalf("first request: %v", err)
	}
	time.Sleep(gap) // the case: the host's delay
	resp, err := f.Get(context.Background(), u+"/two")
	if err != nil || string(resp.Body) != body {
		t.Fatalf("slow answer: body %q, err %v", bodyOf(resp), err)
	}
	if got := ex.requests.Load(); got != 2 {
		t.Errorf("server read %d requests, want 2", got)
	}
	if got := f.Stats().Repeated; got != 0 {
		t.Errorf("Stats().Repeated = %d, want 0", got)
	}
}

// TestRequestOnTheWire: the body that makes a request unreplayable is not
// on the wire: the server reads a plain GET, with neither Content-Length
// nor Transfer-Encoding.
func TestRequestOnTheWire(t *testing.T) {
	noLeak(t)
	heads := make(chan string, 1)
	s := newRawServer(t, func(c net.Conn, _ <-chan struct{}) {
		br := bufio.NewReader(c)
		var head strings.Builder
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(l)
			if l == "\r\n" {
				break
			}
		}
		heads <- head.String()
		_, _ = c.Write([]byte(okResponse("<p>page</p>")))
	})
	cfg := baseConfig()
	u := site(&cfg, s.addr())
	f := New(cfg)
	defer f.Close()
	if _, err := f.Get(context.Background(), u+"/page"); err != nil {
		t.Fatal(err)
	}
	head := <-heads
	if !strings.HasPrefix(head, "GET /page HTTP/1.1\r\n") || strings.Contains(strings.ToLower(head), "content-length") ||
		strings.Contains(strings.ToLower(head), "transfer-encoding") {
		t.Errorf("request head %q: want a plain GET without a body", head)
	}
}
