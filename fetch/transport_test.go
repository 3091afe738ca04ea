package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closedPort is a loopback port where nothing listens: a connection to it
// (on any 127.0.0.0/8 address) is refused at once.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// waitingHosts is how many hosts http.Transport keeps a connection want
// queued for: the state it never gives back for a host that fails. It is
// read through reflection because no API shows it; if the field is gone,
// Go's Transport changed and transport.go's reason must be looked at
// again.
func waitingHosts(t *testing.T, tr *http.Transport) int {
	t.Helper()
	v := reflect.ValueOf(tr).Elem().FieldByName("idleConnWait")
	if !v.IsValid() || v.Kind() != reflect.Map {
		t.Fatalf("http.Transport has no idleConnWait map any more: check what it keeps per host (fetch/transport.go)")
	}
	return v.Len()
}

// failEvery fetches n distinct hosts that fail: even ones refused on
// loopback, odd ones without a DNS name (NXDOMAIN from a resolver on
// loopback).
func failEvery(t *testing.T, f *Fetcher, n, port int) {
	t.Helper()
	for i := range n {
		u := fmt.Sprintf("http://127.0.%d.%d:%d/", 1+i/200, 1+i%200, port)
		if i%2 == 1 {
			u = fmt.Sprintf("http://h%d.nx.example/", i)
		}
		_, err := f.Get(context.Background(), u)
		if c := ClassOf(err); c != ClassConnect && c != ClassDNS {
			t.Fatalf("%s: class %q (%v), want connect or dns", u, c, err)
		}
	}
}

// TestTransportBounded fetches ten times MaxTransportHosts distinct
// failing hosts: the Transport in use has served at most MaxTransportHosts
// of them and keeps state for no more, where one Transport kept for all
// (the control) holds state for every one.
func TestTransportBounded(t *testing.T) {
	noLeak(t)
	const max, hosts = 8, 80
	port := closedPort(t)
	cfg := baseConfig()
	cfg.Resolver = newDNSServer(t, dnsBehaviour{nx: true})

	cfg.MaxTransportHosts = max
	f := New(cfg)
	defer f.Close()
	failEvery(t, f, hosts, port)
	tr, served := f.ts.current()
	if served > max {
		t.Errorf("current transport served %d hosts, want at most %d", served, max)
	}
	if w := waitingHosts(t, tr); w > max {
		t.Errorf("current transport keeps state for %d hosts, want at most %d", w, max)
	}
	if got, want := f.ts.swaps.Load(), int64(hosts/max-1); got < want {
		t.Errorf("%d transport swaps, want at least %d", got, want)
	}

	cfg.MaxTransportHosts = 10 * hosts
	control := New(cfg)
	defer control.Close()
	failEvery(t, control, hosts, port)
	tr, _ = control.ts.current()
	if w := waitingHosts(t, tr); w < hosts/2 {
		t.Errorf("control: one transport for all keeps state for %d hosts; the measure does not see the leak it bounds", w)
	}
}

// TestTransportSwapKeepsInFlight swaps the Transport while a request is
// on the old one: the request completes with its whole body, the old
// Transport closes its connection once idle, and the host is fetched again
// on the new Transport.
func TestTransportSwapKeepsInFlight(t *testing.T) {
	noLeak(t)
	entered, release := make(chan struct{}), make(chan struct{})
	closed := make(chan struct{}, 4)
	body := "<p>whole page</p>"
	var answered atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if !answered.Swap(true) {
			w.Write([]byte("<p>whole ")) // the answer is under way
			w.(http.Flusher).Flush()
			close(entered)
			<-release
			w.Write([]byte("page</p>"))
			return
		}
		w.Write([]byte(body))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo() // before srv.Close, which waits for the handler

	cfg := baseConfig()
	cfg.MaxTransportHosts = 2
	cfg.Resolve = map[string]string{"slow.example:80": srv.Listener.Addr().String()}
	f := New(cfg)
	defer f.Close()
	old, _ := f.ts.current()
	type got struct {
		resp *Response
		err  error
	}
	done := make(chan got, 1)
	go func() {
		resp, err := f.Get(context.Background(), "http://slow.example/")
		done <- got{resp, err}
	}()
	<-entered
	failEvery(t, f, 4, closedPort(t))
	if cur, _ := f.ts.current(); cur == old {
		t.Fatal("the transport was not replaced")
	}
	letGo()
	g := <-done
	if g.err != nil || string(g.resp.Body) != body {
		t.Fatalf("in-flight request across the swap: body %q, err %v; want %q", bodyOf(g.resp), g.err, body)
	}
	select {
	case <-closed: // the old transport's connection, closed once idle
	case <-time.After(10 * time.Second):
		t.Fatal("the old transport kept its connection after its request")
	}
	resp, err := f.Get(context.Background(), "http://slow.example/")
	if err != nil || string(resp.Body) != body {
		t.Fatalf("after the swap: body %q, err %v", bodyOf(resp), err)
	}
}

func bodyOf(r *Response) string {
	if r == nil {
		return ""
	}
	return string(r.Body)
}
