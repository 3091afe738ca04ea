package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"backfill/backoff"
	"backfill/seconds"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// Back-off between attempts of an operation the server could not take:
// it doubles from the first to the longest pause, with jitter.
const (
	mongoBackoffFirst = 50 * time.Millisecond
	mongoBackoffMax   = 2 * time.Second
)

// do runs fn until it succeeds, fails for good, or fails for want of the
// server for longer than retryFor. Each attempt gets at most s.timeout.
// Every write of the store is an idempotent upsert or update, so an attempt
// that reached the server before the connection dropped does no harm when
// repeated.
//
// A server that refuses connections would otherwise be reported only when
// the attempt's server selection times out; the driver's monitor sees the
// refusal at once (mongoHealth), and the attempt ends with it then.
func (s *mongoStore) do(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	pause := backoff.New(mongoBackoffFirst, mongoBackoffMax)
	for attempt := 1; ; attempt++ {
		rctx, refused := context.WithCancelCause(ctx)
		stop := s.health.onRefused(refused)
		actx, cancel := context.WithTimeout(rctx, s.timeout)
		err := fn(actx)
		cancel()
		stop()
		var cre *ConnRefusedError
		if cause := context.Cause(rctx); err != nil && errors.As(cause, &cre) && ctx.Err() == nil {
			err = cause
		}
		refused(nil)
		if err == nil {
			if attempt > 1 {
				s.log.Info("mongodb reachable again", "op", op, "attempts", attempt, seconds.Attr("after", time.Since(start).Round(time.Millisecond)))
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("store: %s: %w", op, ctx.Err())
		}
		if cre := (*ConnRefusedError)(nil); s.opening && errors.As(err, &cre) {
			return fmt.Errorf("%w: %s: %s", ErrUnavailable, op, s.refusal(cre))
		}
		if !mongoTransient(err) {
			return fmt.Errorf("store: %s: %w", op, mongoErr(err))
		}
		wait := pause.Next()
		if time.Since(start)+wait > s.retryFor {
			return fmt.Errorf("%w: %s: mongodb %s: gave up after %d attempts in %s: %v",
				ErrUnavailable, op, s.where, attempt, time.Since(start).Round(time.Millisecond), mongoErr(err))
		}
		if attempt == 1 {
			msg := "mongodb not answering; retrying with back-off"
			if errors.As(err, new(*ConnRefusedError)) {
				msg = "mongodb not answering: " + err.Error() + "; retrying with back-off"
			}
			s.log.Warn(msg, "op", op, "error", mongoErr(err), seconds.Attr("retry_for", s.retryFor))
		}
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("store: %s: %w", op, ctx.Err())
		}
	}
}

// refusal says a connection was refused, naming the address only when
// the URI does not already (a replica set member it did not list).
func (s *mongoStore) refusal(e *ConnRefusedError) string {
	for _, h := range s.hosts {
		if h == e.Addr {
			return "connection refused: nothing listens there (is the server started, and the host and port right?)"
		}
	}
	return e.Error() + ": nothing listens there (is the server started, and the host and port right?)"
}

// mongoTransientCodes are server error codes that say "not now" rather than
// "never": the server is shutting down, stepping down or unreachable.
var mongoTransientCodes = []int{
	6,     // HostUnreachable
	7,     // HostNotFound
	89,    // NetworkTimeout
	91,    // ShutdownInProgress
	189,   // PrimarySteppedDown
	262,   // ExceededTimeLimit
	9001,  // SocketException
	10107, // NotWritablePrimary
	11600, // InterruptedAtShutdown
	11602, // InterruptedDueToReplStateChange
	13435, // NotPrimaryNoSecondaryOk
	13436, // NotPrimaryOrSecondary
}

// mongoTransient reports whether err may go away by itself: the connection
// dropped, no server could be selected, an attempt timed out, or the server
// said it cannot serve now. A duplicate key is transient too: two upserts of
// one new _id raced, and the loser finds the document on its next attempt.
func mongoTransient(err error) bool {
	if errors.As(err, new(*ConnRefusedError)) {
		return true
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || mongo.IsDuplicateKeyError(err) {
		return true
	}
	if errors.As(err, new(topology.ServerSelectionError)) {
		return true
	}
	var le mongo.LabeledError
	if errors.As(err, &le) && (le.HasErrorLabel("RetryableWriteError") || le.HasErrorLabel("TransientTransactionError")) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range mongoTransientCodes {
			if se.HasErrorCode(c) {
				return true
			}
		}
	}
	return errors.Is(err, mongo.ErrClientDisconnected)
}

// mongoErr shortens the driver's errors for messages: a server selection
// error lists every server's state, which says little more than that none
// answered.
func mongoErr(err error) error {
	var sse topology.ServerSelectionError
	if errors.As(err, &sse) {
		if sse.Wrapped != nil {
			return fmt.Errorf("no server answered: %w", sse.Wrapped)
		}
		return errors.New("no server answered")
	}
	return err
}

// mongoTLS builds the client's TLS settings from the CA and client
// certificate files.
func mongoTLS(opts Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", opts.CAFile)
		}
		tc.RootCAs = pool
	}
	if opts.KeyFile != "" && opts.CertFile == "" {
		return nil, errors.New("a key file needs a client certificate file")
	}
	if opts.CertFile != "" {
		keyFile := opts.KeyFile
		if keyFile == "" {
			keyFile = opts.CertFile // MongoDB's convention: certificate and key in one PEM file
		}
		cert, err := tls.LoadX509KeyPair(opts.CertFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s: %w", opts.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// ConnRefusedError says a MongoDB server refused the connection: nothing
// listens at Addr (a server that is down, or a wrong host or port).
type ConnRefusedError struct{ Addr string }

func (e *ConnRefusedError) Error() string { return "connection refused at " + e.Addr }

// mongoHealth follows the driver's heartbeats to hear at once when a
// server refuses connections, and tells the attempts under way.
type mongoHealth struct {
	mu      sync.Mutex
	waiters map[int]func(error)
	next    int
}

// onRefused calls f with a *ConnRefusedError when a heartbeat is refused,
// until stop is called.
func (h *mongoHealth) onRefused(f func(error)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	h.waiters[id] = f
	return func() {
		h.mu.Lock()
		delete(h.waiters, id)
		h.mu.Unlock()
	}
}

func (h *mongoHealth) failed(e *event.ServerHeartbeatFailedEvent) {
	if !errors.Is(e.Failure, syscall.ECONNREFUSED) {
		return
	}
	addr := e.ConnectionID
	var oe *net.OpError
	if errors.As(e.Failure, &oe) && oe.Addr != nil {
		addr = oe.Addr.String()
	} else if i := strings.LastIndex(addr, "["); i > 0 {
		addr = addr[:i] // "host:port[-3]"
	}
	err := &ConnRefusedError{Addr: addr}
	h.mu.Lock()
	ws := make([]func(error), 0, len(h.waiters))
	for _, w := range h.waiters {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w(err)
	}
}
