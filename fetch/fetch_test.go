package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"

	"backfill/proctest"
)

// baseConfig is what every case starts from: loopback allowed, limits
// generous enough for a slow machine under the race detector. Cases about
// hangs shorten the one limit they exercise.
func baseConfig() Config {
	return Config{
		UserAgent:      testUA,
		AllowLoopback:  true,
		Timeout:        6 * time.Second,
		DNSTimeout:     2 * time.Second,
		ConnectTimeout: 2 * time.Second,
		TLSTimeout:     2 * time.Second,
		HeaderTimeout:  2 * time.Second,
		IdleTimeout:    2 * time.Second,
		MaxBody:        1 << 20,
	}
}

// site maps the name "site.example:80" to addr, so every case fetches a
// real-looking URL through Config.Resolve.
func site(cfg *Config, addr string) string {
	cfg.Resolve = map[string]string{"site.example:80": addr}
	return "http://site.example"
}

const ruText = "<html><head><title>Сотрудники лаборатории</title></head><body><p>Иван Петрович Сидоров — старший научный сотрудник лаборатории. " +
	"Телефон и адрес электронной почты указаны ниже. Он занимается исследованиями в области физики твёрдого тела.</p></body></html>"

const jaText = "<html><head><title>研究者紹介</title></head><body><p>山田太郎は東京大学の教授です。専門は情報科学で、連絡先は以下の通りです。" +
	"研究室では自然言語処理と機械学習の研究を行っています。</p></body></html>"

var (
	cp1251Page = must(charmap.Windows1251.NewEncoder().Bytes([]byte(ruText)))
	sjisPage   = must(japanese.ShiftJIS.NewEncoder().Bytes([]byte(jaText)))
	pngBytes   = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
)

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// bomb compresses n zero bytes with the named coding.
func bomb(coding string, n int) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w, _ = gzip.NewWriterLevel(&buf, gzip.BestCompression)
	case "deflate":
		w, _ = zlib.NewWriterLevel(&buf, zlib.BestCompression)
	case "br":
		w = brotli.NewWriterLevel(&buf, brotli.DefaultCompression)
	}
	zero := make([]byte, 1<<20)
	for i := 0; i < n>>20; i++ {
		_, _ = w.Write(zero)
	}
	_ = w.Close()
	return buf.Bytes()
}

func encoded(coding string, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		w, _ = flate.NewWriter(&buf, flate.DefaultCompression)
	case "br":
		w = brotli.NewWriter(&buf)
	}
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// serveBytes answers every request with body, content type and encoding.
func serveBytes(ct, ce string, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing by the server
		}
		if ce != "" {
			w.Header().Set("Content-Encoding", ce)
		}
		_, _ = w.Write(body)
	})
}

type fetchCase struct {
	name string
	// setup starts the case's server(s), adjusts cfg and returns the URL.
	setup func(t *testing.T, cfg *Config) string
	want  Class
	check func(t *testing.T, r *Response, err error)
}

func TestGet(t *testing.T) {
	var cases []fetchCase
	cases = append(cases, basicCases()...)
	cases = append(cases, hangCases()...)
	cases = append(cases, malformedCases()...)
	cases = append(cases, redirectCases()...)
	cases = append(cases, sizeCases()...)
	cases = append(cases, contentCases()...)
	cases = append(cases, guardCases()...)
	cases = append(cases, tlsCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeak(t)
			cfg := baseConfig()
			u := tc.setup(t, &cfg)
			f := New(cfg)
			t.Cleanup(f.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := f.Get(ctx, u)
			if ctx.Err() != nil {
				t.Fatalf("Get outlived the 10s test bound: %v", err)
			}
			if got := ClassOf(err); got != tc.want {
				t.Fatalf("class = %q, want %q (err: %v)", got, tc.want, err)
			}
			if err != nil && !strings.Contains(err.Error(), "fetch ") {
				t.Errorf("error %q does not name the URL", err)
			}
			if r != nil && !utf8.Valid(r.Body) && r.Charset != "" {
				t.Errorf("text body is not valid UTF-8")
			}
			if tc.check != nil {
				tc.check(t, r, err)
			}
		})
	}
}

func basicCases() []fetchCase {
	return []fetchCase{
		{name: "ok", want: "", setup: func(t *testing.T, cfg *Config) string {
			var ua atomic.Value
			addr := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ua.Store(r.UserAgent() + "|" + r.Host)
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				fmt.Fprint(w, "<html><body>héllo</body></html>")
			}))
			t.Cleanup(func() {
				if got := ua.Load(); got != testUA+"|site.example" {
					t.Errorf("server saw UA|Host %q", got)
				}
			})
			return site(cfg, addr) + "/page#frag"
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.Status != 200 || string(r.Body) != "<html><body>héllo</body></html>" || r.ContentType != "text/html" ||
				r.Charset != "utf-8" || r.URL != "http://site.example/page" || r.Truncated || r.Redirects != 0 {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "404 keeps response", want: ClassStatus, setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(404)
				fmt.Fprint(w, "no such page")
			})))
		}, check: func(t *testing.T, r *Response, _ error) {
			if r == nil || r.Status != 404 || string(r.Body) != "no such page" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "status 999", want: ClassStatus, setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newRawServer(t, writeRaw("HTTP/1.1 999 Whatever\r\nContent-Length: 2\r\n\r\nhi")).addr())
		}, check: func(t *testing.T, r *Response, _ error) {
			if r == nil || r.Status != 999 {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "no user agent", want: ClassOther, setup: func(t *testing.T, cfg *Config) string {
			cfg.UserAgent = ""
			return "http://site.example/"
		}},
		{name: "unsupported scheme", want: ClassURL, setup: func(t *testing.T, cfg *Config) string {
			return "ftp://site.example/file"
		}},
		{name: "no host", want: ClassURL, setup: func(t *testing.T, cfg *Config) string {
			return "http:///path"
		}},
	}
}

func hangCases() []fetchCase {
	return []fetchCase{
		{name: "accept then silence", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.HeaderTimeout = 300 * time.Millisecond
			cfg.IdleTimeout = 5 * time.Second // only the first-byte limit can end it
			return site(cfg, newRawServer(t, hold).addr())
		}},
		{name: "request read then silence", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.HeaderTimeout = 300 * time.Millisecond
			cfg.IdleTimeout = 5 * time.Second
			return site(cfg, newRawServer(t, func(c net.Conn, done <-chan struct{}) { readRequest(c); <-done }).addr())
		}},
		{name: "headers trickled", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.HeaderTimeout = 300 * time.Millisecond // each byte comes well within IdleTimeout
			return site(cfg, newRawServer(t, func(c net.Conn, done <-chan struct{}) {
				readRequest(c)
				trickle(c, done, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: "+strings.Repeat("a", 200)+"\r\n\r\n", 20*time.Millisecond)
				<-done
			}).addr())
		}},
		{name: "body trickled", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.Timeout = 600 * time.Millisecond
			return site(cfg, newRawServer(t, func(c net.Conn, done <-chan struct{}) {
				readRequest(c)
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"))
				trickle(c, done, strings.Repeat("x", 100000), 20*time.Millisecond)
			}).addr())
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), errTotalTimeout.Error()) {
				t.Errorf("want the total limit named, got %v", err)
			}
		}},
		{name: "silence mid-body", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.IdleTimeout = 200 * time.Millisecond
			return site(cfg, newRawServer(t, func(c net.Conn, done <-chan struct{}) {
				readRequest(c)
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nsome"))
				<-done
			}).addr())
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "silent") {
				t.Errorf("want the idle limit named, got %v", err)
			}
		}},
		{name: "tls handshake silence", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.TLSTimeout = 300 * time.Millisecond
			cfg.HeaderTimeout, cfg.IdleTimeout = 5*time.Second, 5*time.Second
			cfg.Resolve = map[string]string{"site.example:443": newRawServer(t, hold).addr()}
			return "https://site.example/"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "TLS handshake") {
				t.Errorf("want the handshake named, got %v", err)
			}
		}},
		{name: "connect never completes", want: ClassTimeout, setup: func(t *testing.T, cfg *Config) string {
			cfg.ConnectTimeout = 300 * time.Millisecond
			addr, ok := fullListener(t)
			if !ok {
				proctest.Missing(t, "a kernel that leaves connects to a full accept queue pending", "a connect that never completes")
			}
			return site(cfg, addr)
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "connect") {
				t.Errorf("want the connect stage named, got %v", err)
			}
		}},
		{name: "dns silence", want: ClassDNS, setup: func(t *testing.T, cfg *Config) string {
			cfg.DNSTimeout = 300 * time.Millisecond
			cfg.Resolver = newDNSServer(t, dnsBehaviour{silent: true})
			return "http://people.example/"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "dns lookup of people.example: no answer within") {
				t.Errorf("want the dns stage named, got %v", err)
			}
		}},
		{name: "dns silence past the fetch's deadline", want: ClassDNS, setup: func(t *testing.T, cfg *Config) string {
			cfg.Timeout = 300 * time.Millisecond
			cfg.DNSTimeout = 5 * time.Second
			cfg.Resolver = newDNSServer(t, dnsBehaviour{silent: true})
			return "http://people.example/"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "dns lookup of people.example: no answer before the deadline") {
				t.Errorf("want the dns stage named, got %v", err)
			}
		}},
	}
}

func malformedCases() []fetchCase {
	raw := func(resp string) func(t *testing.T, cfg *Config) string {
		return func(t *testing.T, cfg *Config) string { return site(cfg, newRawServer(t, writeRaw(resp)).addr()) }
	}
	return []fetchCase{
		{name: "garbled status line", want: ClassProtocol, setup: raw("HTTP/1.1 two hundred OK\r\n\r\n")},
		{name: "not http at all", want: ClassProtocol, setup: raw("SSH-2.0-OpenSSH_9.0\r\n")},
		{name: "status 0", want: ClassProtocol, setup: raw("HTTP/1.1 0 Zero\r\nContent-Length: 0\r\n\r\n")},
		{name: "closed after request", want: ClassProtocol, setup: raw("")},
		{name: "closed mid-headers", want: ClassProtocol, setup: raw("HTTP/1.1 200 OK\r\nContent-Type: text/ht")},
		{name: "closed mid-body", want: ClassProtocol, setup: raw("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this")},
		{name: "content-length too small", want: "", setup: raw("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello and more"),
			check: func(t *testing.T, r *Response, _ error) {
				if string(r.Body) != "hello" {
					t.Errorf("body %q", r.Body)
				}
			}},
		{name: "no content-length, closed", want: "", setup: raw("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nall of it"),
			check: func(t *testing.T, r *Response, _ error) {
				if string(r.Body) != "all of it" {
					t.Errorf("body %q", r.Body)
				}
			}},
		{name: "ten thousand headers", want: ClassTooLarge, setup: raw("HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 10000) + "Content-Length: 0\r\n\r\n")},
		{name: "megabyte header", want: ClassTooLarge, setup: raw("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 1<<20) + "\r\nContent-Length: 0\r\n\r\n")},
		{name: "high-bit header bytes", want: "", setup: raw("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Name: caf\xe9 \xff\xfe\r\nContent-Length: 2\r\n\r\nok"),
			check: func(t *testing.T, r *Response, _ error) {
				v := r.Header.Get("X-Name")
				if !utf8.ValidString(v) || !strings.HasPrefix(v, "caf") {
					t.Errorf("header %q", v)
				}
			}},
		{name: "unsupported content encoding", want: ClassEncoding, setup: raw("HTTP/1.1 200 OK\r\nContent-Encoding: compress\r\nContent-Length: 2\r\n\r\nok")},
		{name: "corrupt gzip", want: ClassEncoding, setup: raw("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 12\r\n\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff")},
		{name: "bad chunked encoding", want: ClassProtocol, setup: raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")},
	}
}

func redirectCases() []fetchCase {
	redirector := func(t *testing.T, cfg *Config, routes map[string]string) string {
		return site(cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if loc, ok := routes[r.URL.Path]; ok {
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusFound)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<p>at %s</p>", r.URL.Path)
		})))
	}
	return []fetchCase{
		{name: "relative location", want: "", setup: func(t *testing.T, cfg *Config) string {
			return redirector(t, cfg, map[string]string{"/a/start": "../b/end?x=1", "/b/end": "/final"}) + "/a/start"
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.URL != "http://site.example/final" || r.Redirects != 2 || string(r.Body) != "<p>at /final</p>" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "redirect loop", want: ClassRedirect, setup: func(t *testing.T, cfg *Config) string {
			return redirector(t, cfg, map[string]string{"/a": "/b", "/b": "/a"}) + "/a"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "loop") {
				t.Errorf("want a loop named, got %v", err)
			}
		}},
		{name: "30-hop chain", want: ClassRedirect, setup: func(t *testing.T, cfg *Config) string {
			routes := map[string]string{}
			for i := 0; i < 30; i++ {
				routes[fmt.Sprintf("/hop%d", i)] = fmt.Sprintf("/hop%d", i+1)
			}
			return redirector(t, cfg, routes) + "/hop0"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "too many redirects: more than 10") {
				t.Errorf("want the cap named, got %v", err)
			}
		}},
		{name: "chain within cap", want: "", setup: func(t *testing.T, cfg *Config) string {
			routes := map[string]string{}
			for i := 0; i < 10; i++ {
				routes[fmt.Sprintf("/hop%d", i)] = fmt.Sprintf("/hop%d", i+1)
			}
			return redirector(t, cfg, routes) + "/hop0"
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.Redirects != 10 || r.URL != "http://site.example/hop10" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "3xx without location", want: ClassRedirect, setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newRawServer(t, writeRaw("HTTP/1.1 301 Moved\r\nContent-Length: 0\r\n\r\n")).addr())
		}},
		{name: "redirect to other scheme", want: ClassRedirect, setup: func(t *testing.T, cfg *Config) string {
			return redirector(t, cfg, map[string]string{"/": "javascript:alert(1)"})
		}},
		{name: "meta refresh followed", want: "", setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				if r.URL.Path == "/old" {
					fmt.Fprint(w, `<html><head><meta http-equiv="Refresh" content="0; URL='/new'"></head></html>`)
					return
				}
				fmt.Fprint(w, "<p>new home</p>")
			}))) + "/old"
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.URL != "http://site.example/new" || r.Redirects != 1 || string(r.Body) != "<p>new home</p>" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "meta refresh loop", want: ClassRedirect, setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				next := "/a"
				if r.URL.Path == "/a" {
					next = "/b"
				}
				fmt.Fprintf(w, `<meta http-equiv="refresh" content="1;url=%s">`, next)
			}))) + "/a"
		}},
		{name: "slow meta refresh is a page", want: "", setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, serveBytes("text/html", "", []byte(`<meta http-equiv="refresh" content="600;url=/elsewhere"><p>stay</p>`))))
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.Redirects != 0 || !strings.Contains(string(r.Body), "stay") {
				t.Errorf("response %+v", r)
			}
		}},
	}
}

func sizeCases() []fetchCase {
	endless := func(ct, ce string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			chunk := bytes.Repeat([]byte("<p>endless</p>\n"), 4096)
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				if r.Context().Err() != nil {
					return
				}
			}
		})
	}
	bombCase := func(coding string) fetchCase {
		return fetchCase{name: coding + " bomb", want: ClassTooLarge, setup: func(t *testing.T, cfg *Config) string {
			// 2 MiB of zeros against a 64 KiB limit: the ratio, not the
			// size, makes it a bomb, so a small one stands for a huge one.
			cfg.MaxBody = 64 << 10
			return site(cfg, newHTTPServer(t, serveBytes("text/html", coding, bomb(coding, 2<<20))))
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "bomb") {
				t.Errorf("want a bomb named, got %v", err)
			}
		}}
	}
	page := []byte(strings.Repeat("<p>a compressed page</p>", 200))
	codingCase := func(coding, header string) fetchCase {
		body := encoded(coding, page)
		return fetchCase{name: coding + " page", want: "", setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, serveBytes("text/html", header, body)))
		}, check: func(t *testing.T, r *Response, _ error) {
			if !bytes.Equal(r.Body, page) || r.Truncated {
				t.Errorf("decoded %d bytes, truncated %v", len(r.Body), r.Truncated)
			}
		}}
	}
	return []fetchCase{
		{name: "endless body truncated", want: "", setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, endless("text/html", "")))
		}, check: func(t *testing.T, r *Response, _ error) {
			if !r.Truncated || int64(len(r.Body)) != 1<<20 {
				t.Errorf("truncated %v, %d bytes", r.Truncated, len(r.Body))
			}
		}},
		{name: "large gzip page truncated, not a bomb", want: "", setup: func(t *testing.T, cfg *Config) string {
			// Ordinary text compresses far less than a bomb: 256 KiB of
			// varied markup is a big page, kept up to the limit.
			cfg.MaxBody = 64 << 10
			var b strings.Builder
			for i := 0; b.Len() < 256<<10; i++ {
				fmt.Fprintf(&b, "<li id=%d>entry %x %d</li>\n", i, i*7919, i*i)
			}
			return site(cfg, newHTTPServer(t, serveBytes("text/html", "gzip", gzipBytes([]byte(b.String())))))
		}, check: func(t *testing.T, r *Response, _ error) {
			if !r.Truncated || int64(len(r.Body)) != 64<<10 {
				t.Errorf("truncated %v, %d bytes", r.Truncated, len(r.Body))
			}
		}},
		bombCase("gzip"), bombCase("deflate"), bombCase("br"),
		codingCase("gzip", "gzip"), codingCase("deflate", "deflate"), codingCase("raw-deflate", "deflate"), codingCase("br", "br"),
		{name: "empty gzip body", want: "", setup: func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, serveBytes("text/html", "gzip", nil)))
		}},
	}
}

func contentCases() []fetchCase {
	serve := func(ct string, body []byte) func(t *testing.T, cfg *Config) string {
		return func(t *testing.T, cfg *Config) string { return site(cfg, newHTTPServer(t, serveBytes(ct, "", body))) }
	}
	want := func(charset, substr string) func(t *testing.T, r *Response, _ error) {
		return func(t *testing.T, r *Response, _ error) {
			if r.Charset != charset || !strings.Contains(string(r.Body), substr) {
				t.Errorf("charset %q, body %q", r.Charset, r.Body)
			}
		}
	}
	metaSJIS := append([]byte(`<html><head><meta charset="Shift_JIS">`), sjisPage[len("<html><head>"):]...)
	return []fetchCase{
		{name: "png as html", want: ClassNotHTML, setup: serve("text/html", pngBytes), check: func(t *testing.T, r *Response, _ error) {
			if r == nil || r.ContentType != "image/png" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "pdf as html", want: ClassNotHTML, setup: serve("text/html; charset=utf-8", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"))},
		{name: "undeclared binary", want: ClassNotHTML, setup: serve("", []byte("\x00\x01\x02\x03\x04\x05\x06\x07binary"))},
		{name: "undeclared html sniffed", want: "", setup: serve("", []byte("<!DOCTYPE html><html><body>x</body></html>")),
			check: func(t *testing.T, r *Response, _ error) {
				if r.ContentType != "text/html" {
					t.Errorf("content type %q", r.ContentType)
				}
			}},
		{name: "windows-1251 undeclared", want: "", setup: serve("text/html", cp1251Page), check: want("windows-1251", "Сотрудники")},
		{name: "windows-1251 declared utf-8", want: "", setup: serve("text/html; charset=utf-8", cp1251Page), check: want("windows-1251", "Сидоров")},
		{name: "windows-1251 declared latin-1", want: "", setup: serve("text/html; charset=iso-8859-1", cp1251Page), check: want("windows-1251", "Сидоров")},
		{name: "shift_jis undeclared", want: "", setup: serve("text/html", sjisPage), check: want("shift_jis", "山田太郎")},
		{name: "shift_jis in meta", want: "", setup: serve("text/html", metaSJIS), check: want("shift_jis", "東京大学")},
		{name: "shift_jis declared euc-jp", want: "", setup: serve("text/html; charset=euc-jp", sjisPage), check: want("shift_jis", "研究者紹介")},
		{name: "unknown charset", want: "", setup: serve("text/html; charset=x-no-such-thing", []byte("<p>naïve</p>")), check: want("utf-8", "naïve")},
		{name: "bad bytes replaced", want: "", setup: serve("text/html; charset=utf-8", []byte("<p>ok \xff\xfe ok ünïcödé</p>")), check: want("utf-8", "ok \uFFFD ok ünïcödé")},
		{name: "nul bytes", want: "", setup: serve("text/html", []byte("<p>a\x00b</p>"+strings.Repeat(" ", 100))), check: want("utf-8", "a\uFFFDb")},
		{name: "utf-16 with bom", want: "", setup: serve("text/html", []byte("\xff\xfe<\x00p\x00>\x00\x12\x04<\x00")), check: want("utf-16le", "<p>В<")},
		{name: "robots.txt served as html", want: "", setup: serve("text/html", []byte("<html><body>User-agent: *<br>Disallow: /</body></html>")),
			check: want("utf-8", "Disallow")},
	}
}

func guardCases() []fetchCase {
	redirectTo := func(loc string) func(t *testing.T, cfg *Config) string {
		return func(t *testing.T, cfg *Config) string {
			return site(cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, loc, http.StatusFound)
			})))
		}
	}
	refused := func(t *testing.T, cfg *Config, u string) string {
		var hits atomic.Int32
		addr := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		t.Cleanup(func() {
			if n := hits.Load(); n != 0 {
				t.Errorf("guarded server received %d requests", n)
			}
		})
		cfg.AllowLoopback = false
		return strings.ReplaceAll(u, "PORT", must(netip.ParseAddrPort(addr)).String()[len("127.0.0.1:"):])
	}
	return []fetchCase{
		{name: "redirect to private address", want: ClassBlocked, setup: redirectTo("http://10.1.2.3/admin")},
		{name: "redirect to metadata address", want: ClassBlocked, setup: redirectTo("http://169.254.169.254/latest/meta-data/")},
		{name: "redirect to cgnat", want: ClassBlocked, setup: redirectTo("http://100.64.0.7/")},
		{name: "redirect to mapped private", want: ClassBlocked, setup: redirectTo("http://[::ffff:192.168.1.1]/")},
		{name: "redirect to multicast", want: ClassBlocked, setup: redirectTo("http://224.0.0.1/")},
		{name: "redirect to unqualified name", want: ClassBlocked, setup: redirectTo("http://intranet/")},
		{name: "loopback refused by default", want: ClassBlocked, setup: func(t *testing.T, cfg *Config) string {
			return refused(t, cfg, "http://127.0.0.1:PORT/")
		}},
		{name: "localhost refused by default", want: ClassBlocked, setup: func(t *testing.T, cfg *Config) string {
			return refused(t, cfg, "http://localhost:PORT/")
		}},
		{name: "sub.localhost refused", want: ClassBlocked, setup: func(t *testing.T, cfg *Config) string {
			return refused(t, cfg, "http://app.localhost:PORT/")
		}},
		{name: "resolve override still guarded", want: ClassBlocked, setup: func(t *testing.T, cfg *Config) string {
			u := refused(t, cfg, "http://site.example:PORT/")
			port := strings.TrimSuffix(strings.TrimPrefix(u, "http://site.example:"), "/")
			cfg.Resolve = map[string]string{"site.example:" + port: "127.0.0.1:" + port}
			return u
		}},
		{name: "dns answer private", want: ClassBlocked, setup: func(t *testing.T, cfg *Config) string {
			cfg.Resolver = newDNSServer(t, dnsBehaviour{answer: netip.MustParseAddr("10.9.8.7")})
			return "http://people.example/"
		}, check: func(t *testing.T, _ *Response, err error) {
			if !strings.Contains(err.Error(), "10.9.8.7 (private)") {
				t.Errorf("want the address and range named, got %v", err)
			}
		}},
		{name: "dns answer loopback allowed", want: "", setup: func(t *testing.T, cfg *Config) string {
			cfg.Resolver = newDNSServer(t, dnsBehaviour{answer: netip.MustParseAddr("127.0.0.1")})
			addr := newHTTPServer(t, serveBytes("text/plain", "", []byte("via dns")))
			return "http://people.example:" + addr[strings.LastIndexByte(addr, ':')+1:] + "/"
		}},
		{name: "dns nxdomain", want: ClassDNS, setup: func(t *testing.T, cfg *Config) string {
			cfg.Resolver = newDNSServer(t, dnsBehaviour{nx: true})
			return "http://nowhere.example/"
		}},
		{name: "connection refused", want: ClassConnect, setup: func(t *testing.T, cfg *Config) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return site(cfg, addr)
		}},
	}
}

func tlsCases() []fetchCase {
	tlsSite := func(t *testing.T, cfg *Config, names ...string) (string, *tls.Certificate) {
		cert, _ := testCert(t, names...)
		srv := httptest.NewUnstartedServer(serveBytes("text/html", "", []byte("<p>secure</p>")))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		cfg.Resolve = map[string]string{"secure.example:443": srv.Listener.Addr().String()}
		return "https://secure.example/", &cert
	}
	return []fetchCase{
		{name: "tls verified", want: "", setup: func(t *testing.T, cfg *Config) string {
			u, cert := tlsSite(t, cfg, "secure.example")
			cfg.RootCAs = poolOf(cert)
			return u
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.TLSError != "" || string(r.Body) != "<p>secure</p>" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "tls unknown authority", want: ClassTLS, setup: func(t *testing.T, cfg *Config) string {
			u, _ := tlsSite(t, cfg, "secure.example")
			return u
		}},
		{name: "tls wrong name", want: ClassTLS, setup: func(t *testing.T, cfg *Config) string {
			u, cert := tlsSite(t, cfg, "other.example")
			cfg.RootCAs = poolOf(cert)
			return u
		}},
		{name: "tls bad cert recorded", want: "", setup: func(t *testing.T, cfg *Config) string {
			u, _ := tlsSite(t, cfg, "other.example")
			cfg.InsecureTLS = true
			return u
		}, check: func(t *testing.T, r *Response, _ error) {
			if r.TLSError == "" || string(r.Body) != "<p>secure</p>" {
				t.Errorf("response %+v", r)
			}
		}},
		{name: "plain http on tls port", want: ClassTLS, setup: func(t *testing.T, cfg *Config) string {
			cfg.Resolve = map[string]string{"secure.example:443": newRawServer(t, func(c net.Conn, _ <-chan struct{}) {
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			}).addr()}
			return "https://secure.example/"
		}},
	}
}

func poolOf(cert *tls.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(cert.Leaf)
	return p
}

// TestGetCanceled cancels the caller's context while the server holds the
// request: the caller's cancel is reported as such, not as a timeout.
func TestGetCanceled(t *testing.T) {
	noLeak(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := baseConfig()
	cfg.HeaderTimeout, cfg.IdleTimeout = 5*time.Second, 5*time.Second
	u := site(&cfg, newRawServer(t, func(c net.Conn, done <-chan struct{}) {
		readRequest(c)
		cancel()
		<-done
	}).addr())
	f := New(cfg)
	defer f.Close()
	_, err := f.Get(ctx, u)
	if ClassOf(err) != ClassCanceled {
		t.Fatalf("class %q, want %q (err: %v)", ClassOf(err), ClassCanceled, err)
	}
}

// TestGetCallerDeadline lets the caller's own deadline end a hanging fetch:
// it is a timeout, and names the caller's deadline.
func TestGetCallerDeadline(t *testing.T) {
	noLeak(t)
	cfg := baseConfig()
	cfg.HeaderTimeout, cfg.IdleTimeout = 5*time.Second, 5*time.Second
	u := site(&cfg, newRawServer(t, hold).addr())
	f := New(cfg)
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := f.Get(ctx, u)
	if ClassOf(err) != ClassTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("class %q (err: %v), want %q from the caller's deadline", ClassOf(err), err, ClassTimeout)
	}
}

// TestGetOtherHostsUnaffected runs fetches to healthy hosts while another
// host holds its connections open: the healthy ones complete within a
// bound far shorter than the hanging host's limit.
func TestGetOtherHostsUnaffected(t *testing.T) {
	noLeak(t)
	cfg := baseConfig()
	cfg.HeaderTimeout, cfg.IdleTimeout = 5*time.Second, 5*time.Second
	cfg.Resolve = map[string]string{"hang.example:80": newRawServer(t, hold).addr()}
	const healthy = 3
	for i := 0; i < healthy; i++ {
		cfg.Resolve[fmt.Sprintf("ok%d.example:80", i)] = newHTTPServer(t, serveBytes("text/html", "", []byte("<p>fine</p>")))
	}
	f := New(cfg)
	defer f.Close()

	hangCtx, stopHang := context.WithCancel(context.Background())
	hangDone := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := f.Get(hangCtx, "http://hang.example/")
			hangDone <- err
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	errs := make(chan error, healthy*5)
	for i := 0; i < healthy*5; i++ {
		go func(i int) {
			_, err := f.Get(ctx, fmt.Sprintf("http://ok%d.example/p%d", i%healthy, i))
			errs <- err
		}(i)
	}
	for i := 0; i < healthy*5; i++ {
		if err := <-errs; err != nil {
			t.Errorf("healthy host failed while another hangs: %v", err)
		}
	}
	stopHang()
	for i := 0; i < 2; i++ {
		if c := ClassOf(<-hangDone); c != ClassCanceled {
			t.Errorf("hanging fetch ended as %q, want %q", c, ClassCanceled)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	page := bytes.Repeat([]byte("<p>benchmark page</p>\n"), 1000)
	srv := httptest.NewServer(serveBytes("text/html; charset=utf-8", "", page))
	defer srv.Close()
	cfg := baseConfig()
	cfg.Resolve = map[string]string{"bench.example:80": srv.Listener.Addr().String()}
	f := New(cfg)
	defer f.Close()
	ctx := context.Background()
	b.SetBytes(int64(len(page)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Get(ctx, "http://bench.example/"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCP1251(b *testing.B) {
	body := bytes.Repeat(cp1251Page, 50)
	b.SetBytes(int64(len(body)))
	for i := 0; i < b.N; i++ {
		decodeText(body, "", true)
	}
}
