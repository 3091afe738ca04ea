package fetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// tlsSite serves h over TLS for site.example on loopback, offering HTTP/2
// in the handshake when h2 is set, and points cfg at it. It counts the
// connections the server accepted and the protocols of the requests it
// served.
type tlsSite struct {
	conns  atomic.Int32
	mu     sync.Mutex
	protos []string
}

func newTLSSite(t *testing.T, cfg *Config, h2 bool, h http.Handler) (string, *tlsSite) {
	t.Helper()
	s := &tlsSite{}
	cert, pool := testCert(t, "site.example")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.protos = append(s.protos, r.Proto)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = h2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg.RootCAs = pool
	cfg.Resolve = map[string]string{"site.example:443": srv.Listener.Addr().String()}
	return "https://site.example", s
}

func (s *tlsSite) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.protos...)
}

// TestOneConnectionPerHost: robots.txt (read with its own cap, as the
// supervisor reads it) and several pages of one host go over one
// connection, HTTP/2 when the server offers it, HTTP/1.1 kept alive when
// it does not.
func TestOneConnectionPerHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h2    bool
		proto string
	}{
		{name: "h2 offered", h2: true, proto: "HTTP/2.0"},
		{name: "http/1.1 only", h2: false, proto: "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeak(t)
			cfg := baseConfig()
			u, s := newTLSSite(t, &cfg, tc.h2, serveBytes("text/html", "", []byte("<p>page</p>")))
			f := New(cfg)
			defer f.Close()
			if _, err := f.Do(context.Background(), u+"/robots.txt", Request{MaxBody: 500 << 10, IgnoreMetaRefresh: true}); err != nil {
				t.Fatalf("robots.txt: %v", err)
			}
			for i := range 5 {
				if _, err := f.Get(context.Background(), fmt.Sprintf("%s/page/%d", u, i)); err != nil {
					t.Fatalf("page %d: %v", i, err)
				}
			}
			if c := s.conns.Load(); c != 1 {
				t.Errorf("%d connections for 6 requests, want 1", c)
			}
			for _, p := range s.seen() {
				if p != tc.proto {
					t.Errorf("request over %s, want %s (all: %v)", p, tc.proto, s.seen())
					break
				}
			}
		})
	}
}

// TestHTTP2IdleConnOutlivesIdleTimeout: an HTTP/2 connection left idle
// longer than IdleTimeout carries the next request (conn.go's deadlines
// are the request's over HTTP/2 too).
func TestHTTP2IdleConnOutlivesIdleTimeout(t *testing.T) {
	noLeak(t)
	cfg := baseConfig()
	cfg.IdleTimeout = 200 * time.Millisecond
	u, s := newTLSSite(t, &cfg, true, serveBytes("text/html", "", []byte("<p>page</p>")))
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
	if c, p := s.conns.Load(), s.seen(); c != 1 || len(p) != 2 || p[1] != "HTTP/2.0" {
		t.Errorf("%d connections, requests over %v; want 1 connection, 2 requests over HTTP/2.0", c, p)
	}
}

// TestHTTP2Limits: the fetcher's limits hold over HTTP/2 as they do over
// HTTP/1.1 (fetch_test.go's cases).
func TestHTTP2Limits(t *testing.T) {
	cases := []struct {
		name  string
		cfg   func(*Config)
		h     http.Handler
		want  Class
		check func(t *testing.T, r *Response, err error)
	}{
		{name: "header bytes", want: ClassTooLarge, cfg: func(c *Config) { c.MaxHeaderBytes = 4 << 10 },
			h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := range 10 {
					w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("a", 600))
				}
				w.Write([]byte("<p>page</p>"))
			})},
		// A header block over twice the limit is not even decoded (nor
		// a single value longer than the limit): the HTTP/2 client drops
		// the connection with an error that does not say why, so the
		// class is the protocol's.
		{name: "header bytes far over", want: ClassProtocol, cfg: func(c *Config) { c.MaxHeaderBytes = 4 << 10 },
			h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Big", strings.Repeat("a", 64<<10))
				w.Write([]byte("<p>page</p>"))
			})},
		{name: "header lines", want: ClassTooLarge,
			h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := range DefaultMaxHeaders + 10 {
					w.Header().Add("X-Many", fmt.Sprint(i))
				}
				w.Write([]byte("<p>page</p>"))
			})},
		{name: "body truncated", want: "", cfg: func(c *Config) { c.MaxBody = 64 << 10 },
			h: serveBytes("text/html", "", bytes.Repeat([]byte("<p>long page</p>\n"), 16<<10)),
			check: func(t *testing.T, r *Response, _ error) {
				if !r.Truncated || len(r.Body) != 64<<10 {
					t.Errorf("truncated %v, %d bytes, want 64 KiB kept", r.Truncated, len(r.Body))
				}
			}},
		{name: "gzip bomb", want: ClassTooLarge, cfg: func(c *Config) { c.MaxBody = 64 << 10 },
			h: serveBytes("text/html", "gzip", bomb("gzip", 2<<20))},
		{name: "br page decoded", want: "",
			h: serveBytes("text/html", "br", encoded("br", []byte(strings.Repeat("<p>page</p>", 100)))),
			check: func(t *testing.T, r *Response, _ error) {
				if string(r.Body) != strings.Repeat("<p>page</p>", 100) {
					t.Errorf("body %d bytes, want the decoded page", len(r.Body))
				}
			}},
		{name: "silence mid-body", want: ClassTimeout, cfg: func(c *Config) { c.IdleTimeout = 300 * time.Millisecond },
			h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<p>some"))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}),
			check: func(t *testing.T, _ *Response, err error) {
				if !strings.Contains(err.Error(), "silent") {
					t.Errorf("want the idle limit named, got %v", err)
				}
			}},
		{name: "loopback refused", want: ClassBlocked, cfg: func(c *Config) { c.AllowLoopback = false },
			h: serveBytes("text/html", "", []byte("<p>page</p>"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeak(t)
			cfg := baseConfig()
			u, s := newTLSSite(t, &cfg, true, tc.h)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			f := New(cfg)
			defer f.Close()
			r, err := f.Get(context.Background(), u+"/")
			if got := ClassOf(err); got != tc.want {
				t.Fatalf("class %q (%v), want %q", got, err, tc.want)
			}
			for _, p := range s.seen() {
				if p != "HTTP/2.0" {
					t.Errorf("request over %s, want HTTP/2.0", p)
				}
			}
			if tc.check != nil {
				tc.check(t, r, err)
			}
		})
	}
}

// h2Answer is what a raw HTTP/2 server does with one request.
type h2Answer int

const (
	h2OK            h2Answer = iota // a 200 with a small page
	h2ResetProtocol                 // RST_STREAM PROTOCOL_ERROR, after reading it
	h2Refuse                        // RST_STREAM REFUSED_STREAM
	h2GoAway                        // GOAWAY naming the stream before it, then close
)

// newH2Server is an HTTP/2 server over TLS on loopback written frame by
// frame, so it can end a request in the ways the HTTP/2 client would
// resend one: answer(n) says what to do with the nth request (from 1,
// across connections). It points cfg at site.example:443.
func newH2Server(t *testing.T, cfg *Config, answer func(n int) h2Answer) (string, *exchanges) {
	t.Helper()
	cert, pool := testCert(t, "site.example")
	tcfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
	ex := &exchanges{}
	s := newRawServer(t, func(c net.Conn, _ <-chan struct{}) {
		ex.conns.Add(1)
		tc := tls.Server(c, tcfg)
		if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
			return
		}
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(tc, preface); err != nil || string(preface) != http2.ClientPreface {
			return
		}
		fr := http2.NewFramer(tc, tc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if fr.WriteSettings() != nil {
			return
		}
		var hbuf bytes.Buffer
		enc := hpack.NewEncoder(&hbuf)
		last := uint32(0)
		for {
			frame, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := frame.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && fr.WriteSettingsAck() != nil {
					return
				}
			case *http2.PingFrame:
				if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
					return
				}
			case *http2.MetaHeadersFrame:
				id := f.StreamID
				switch answer(int(ex.requests.Add(1))) {
				case h2OK:
					body := []byte("<p>page</p>")
					hbuf.Reset()
					enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
					enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/html"})
					enc.WriteField(hpack.HeaderField{Name: "content-length", Value: fmt.Sprint(len(body))})
					if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true}) != nil ||
						fr.WriteData(id, true, body) != nil {
						return
					}
				case h2ResetProtocol:
					if fr.WriteRSTStream(id, http2.ErrCodeProtocol) != nil {
						return
					}
				case h2Refuse:
					if fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) != nil {
						return
					}
				case h2GoAway:
					_ = fr.WriteGoAway(last, http2.ErrCodeNo, nil)
					return
				}
				last = id
			}
		}
	})
	cfg.RootCAs = pool
	cfg.Resolve = map[string]string{"site.example:443": s.addr()}
	return "https://site.example", ex
}

// TestHTTP2NoResend: the HTTP/2 client resends a request the server
// reset with PROTOCOL_ERROR (which it may send after acting on the
// request), refused, or left out of a GOAWAY. The server here reads the
// second request and ends it each of those ways: it sees it once, and the
// caller gets a classified error saying it was not sent again. The
// control sends requests the transport may resend: the server reads the
// second request twice and Stats counts the repeat.
func TestHTTP2NoResend(t *testing.T) {
	for _, end := range []struct {
		name string
		how  h2Answer
	}{
		{"reset PROTOCOL_ERROR", h2ResetProtocol},
		{"refused", h2Refuse},
		{"goaway", h2GoAway},
	} {
		for _, resend := range []bool{false, true} {
			name := end.name
			if resend {
				name += " replayable control"
			}
			t.Run(name, func(t *testing.T) {
				noLeak(t)
				cfg := baseConfig()
				u, ex := newH2Server(t, &cfg, func(n int) h2Answer {
					if n == 2 {
						return end.how
					}
					return h2OK
				})
				f := New(cfg)
				f.resend = resend
				defer f.Close()
				if _, err := f.Get(context.Background(), u+"/one"); err != nil {
					t.Fatalf("first request: %v", err)
				}
				_, err := f.Get(context.Background(), u+"/two")
				wantRequests, wantRepeated, wantClass := int32(2), int64(0), ClassProtocol
				if resend {
					wantRequests, wantRepeated, wantClass = 3, 1, ""
				}
				if got := ClassOf(err); got != wantClass {
					t.Errorf("second request: class %q (%v), want %q", got, err, wantClass)
				}
				if err != nil && !strings.Contains(err.Error(), "not sent again") {
					t.Errorf("second request: %v, want it said that it was not sent again", err)
				}
				if got := ex.requests.Load(); got != wantRequests {
					t.Errorf("server read %d requests, want %d", got, wantRequests)
				}
				if got := f.Stats().Repeated; got != wantRepeated {
					t.Errorf("Stats().Repeated = %d, want %d", got, wantRepeated)
				}
			})
		}
	}
}
