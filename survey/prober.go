package survey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"time"

	"backfill/fetch"
	"backfill/wire"
)

// ProberConfig configures the supervisor side of a survey.
type ProberConfig struct {
	// Fetch supplies the address guard every probe dials through
	// (AllowLoopback, AllowPrivate, Deny: the supervisor's blacklist),
	// the CA pool certificates are verified against (RootCAs) and the
	// User-Agent used when a task names none.
	Fetch  fetch.Config
	Logger *slog.Logger
}

// Prober runs survey tasks on a supervisor (it is the supervisor's
// Config.Prober). Per supervisor it keeps the survey's politeness: one
// task of an address at a time, the task's Delay between two connections
// to its address, at most Spec.Per24 connections at once into one /24
// (/48), and Spec.Rate connections a second overall. The survey's
// dispatcher sends all addresses of a /24 to one supervisor, so the cap
// holds across the cluster. Safe for concurrent use.
type Prober struct {
	cfg     ProberConfig
	log     *slog.Logger
	fetcher *fetch.Fetcher
	ua      string // when a task names none
	pace    pacer
	blocks  blockSlots
	gate    ipGate
}

// NewProber builds a Prober; Close releases it.
func NewProber(cfg ProberConfig) *Prober {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fc := cfg.Fetch
	if fc.UserAgent == "" {
		fc.UserAgent = "backfill-survey"
	}
	return &Prober{cfg: cfg, log: log, fetcher: fetch.New(fc), ua: fc.UserAgent}
}

// Close releases the dialer's resources.
func (p *Prober) Close() { p.fetcher.Close() }

// Probe runs one task: every connection it makes goes to the task's
// address.
func (p *Prober) Probe(ctx context.Context, t *wire.SurveyTask) wire.SurveyResult {
	r := wire.SurveyResult{TaskID: t.ID, Lease: t.Lease, IP: t.IP}
	ip, err := netip.ParseAddr(t.IP)
	if err != nil {
		r.Error, r.At = fmt.Sprintf("task address %q: %v", t.IP, err), time.Now().UTC()
		return r
	}
	ip = ip.Unmap()
	turn, err := p.gate.enter(ctx, ip, t.Spec.Delay)
	if err != nil {
		r.Error, r.At = err.Error(), time.Now().UTC()
		return r
	}
	defer p.gate.leave(ip, turn)
	c := &connector{p: p, ip: ip, spec: t.Spec}
	switch t.Job {
	case wire.SurveyPorts:
		r.Ports = p.probePorts(ctx, c, t.Ports)
	case wire.SurveyWeb:
		r.Web = p.probeWeb(ctx, c, t.Hosts)
	default:
		r.Error = fmt.Sprintf("unknown survey job %q", t.Job)
	}
	r.At = time.Now().UTC()
	return r
}

// connector makes a task's connections one after another, each after the
// delay, a /24 slot and its turn under the rate.
type connector struct {
	p     *Prober
	ip    netip.Addr
	spec  wire.SurveySpec
	made  int
	ended time.Time
}

// do runs one connection's work under the politeness rules.
func (c *connector) do(ctx context.Context, work func()) error {
	if c.made > 0 {
		if err := sleep(ctx, time.Until(c.ended.Add(c.spec.Delay))); err != nil {
			return err
		}
	}
	release, err := c.p.blocks.acquire(ctx, c.ip, c.spec.Per24)
	if err != nil {
		return err
	}
	defer release()
	if err := c.p.pace.wait(ctx, c.spec.Rate); err != nil {
		return err
	}
	c.made++
	work()
	c.ended = time.Now()
	return nil
}

// Port states. Append only: they are written in survey rows.
const (
	PortOpen        = "open"
	PortClosed      = "closed"      // refused: the host answered with a reset
	PortFiltered    = "filtered"    // no answer within the connect timeout
	PortUnreachable = "unreachable" // an ICMP error said the host or network cannot be reached
	PortExcluded    = "excluded"    // on the blocklist or a special-purpose address: not tried
	PortError       = "error"
)

// dialState classifies a failed dial. dctx is the dial's own context,
// ctx the task's.
func dialState(err error, dctx, ctx context.Context) string {
	switch {
	case fetch.ClassOf(err) == fetch.ClassBlocked:
		return PortExcluded
	case errors.Is(err, syscall.ECONNREFUSED):
		return PortClosed
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN), errors.Is(err, syscall.ENONET):
		return PortUnreachable
	case ctx.Err() == nil && (dctx.Err() != nil || isTimeoutErr(err) || fetch.ClassOf(err) == fetch.ClassTimeout):
		return PortFiltered
	}
	return PortError
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
