package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// deadEnd is the browser's proxy, and refuses everything. Every request a
// page makes is intercepted over DevTools and answered by the renderer
// (renderintercept.go); what still reaches the network layer is the
// browser's own traffic (update checks, time queries, account lookups),
// which no flag fully silences. Pointing the browser at a proxy that
// answers each request with a refusal keeps that traffic on loopback and
// makes it countable; together with --host-resolver-rules, which stops the
// browser from resolving any name itself, the browser never reaches the
// network.
type deadEnd struct {
	addr   string
	srv    *http.Server
	log    *slog.Logger
	strays atomic.Int64
	wg     sync.WaitGroup
}

func newDeadEnd(log *slog.Logger) (*deadEnd, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser proxy: %w", err)
	}
	d := &deadEnd{addr: ln.Addr().String(), log: log}
	d.srv = &http.Server{
		Handler:           d,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.srv.Serve(ln) // returns when close closes the listener
	}()
	return d, nil
}

// ServeHTTP refuses a request (or CONNECT) with 403, closing the
// connection.
func (d *deadEnd) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	n := d.strays.Add(1)
	target := req.Host
	if req.Method != http.MethodConnect && req.URL != nil {
		target = req.URL.String()
	}
	d.log.Debug("browser's own request refused", "method", req.Method, "target", target, "refused", n)
	w.Header().Set("Connection", "close")
	http.Error(w, "refused: the renderer makes every request itself", http.StatusForbidden)
}

// close stops the proxy and waits for its goroutines.
func (d *deadEnd) close() error {
	err := d.srv.Close()
	d.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
