package survey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"backfill/resolver"
	"backfill/seconds"
	"backfill/wire"
)

// PortsConfig is a port survey: TCP liveness of ports of many addresses.
type PortsConfig struct {
	Config
	Targets []string // IPs, CIDRs and host names
	Random  int      // draw this many random IPv4 addresses instead
	Seed    uint64   // of the random draw; 0 picks one (Summary and the log say which)
	Ports   []int
	// Blocklist is never probed. It must not be empty: the default one
	// (DefaultBlocklist) ships in the binary.
	Blocklist Blocklist
	// AllowLoopback lets targets in 127.0.0.0/8 through the blocklist
	// (tests and demos); random draws never include them.
	AllowLoopback bool
	Resolver      *resolver.Resolver // for target names; nil refuses names
}

// ErrNoBlocklist: a port survey needs a blocklist in effect.
var ErrNoBlocklist = errors.New("survey: no blocklist in effect; a port survey needs one (the default one, or --blocklist FILE)")

// loopback is the range AllowLoopback lets through.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

func (c *PortsConfig) check() error {
	if c.Blocklist.Empty() {
		return ErrNoBlocklist
	}
	if len(c.Ports) == 0 {
		return errors.New("survey: ports: no ports")
	}
	if (c.Random > 0) == (len(c.Targets) > 0) {
		return errors.New("survey: ports: give targets or a random sample size, not both or neither")
	}
	if c.Random > maxTargets {
		return fmt.Errorf("survey: ports: a random sample of at most %d addresses", maxTargets)
	}
	if c.Random > 0 && c.Seed == 0 {
		c.Seed = randomSeed()
	}
	return nil
}

// PortPlan is what a port survey would probe: every port of every address
// the blocklist leaves. Excluded counts the addresses it leaves out, and
// Loopback those of them it leaves out only for being loopback
// (AllowLoopback takes them in).
type PortPlan struct {
	Addrs              []netip.Addr
	Ports              []int
	Excluded, Loopback int
}

// Targets is how many ip:port pairs the plan probes.
func (p PortPlan) Targets() int { return len(p.Addrs) * len(p.Ports) }

// PlanPorts lists what a port survey would probe, connecting to nothing
// (host names are resolved): what --dry-run prints.
func PlanPorts(ctx context.Context, cfg PortsConfig) (PortPlan, InputReport, error) {
	if err := cfg.check(); err != nil {
		return PortPlan{}, InputReport{}, err
	}
	targets, rep, err := cfg.targets(ctx)
	if err != nil {
		return PortPlan{}, rep, err
	}
	plan := PortPlan{Ports: cfg.Ports}
	bl, butLoopback := cfg.blocklist(), cfg.Blocklist.without(loopback)
	for _, t := range targets {
		if bl.Blocks(t.ip) || (t.name != "" && bl.BlocksHost(t.name)) {
			plan.Excluded++
			if loopback.Contains(t.ip) && !butLoopback.Blocks(t.ip) {
				plan.Loopback++
			}
			continue
		}
		plan.Addrs = append(plan.Addrs, t.ip)
	}
	return plan, rep, nil
}

// PortTargets calls fn for every ip:port the survey would probe, in
// order, and for none it would not. It connects to nothing (host names
// are resolved).
func PortTargets(ctx context.Context, cfg PortsConfig, fn func(ip netip.Addr, port int) error) (InputReport, error) {
	plan, rep, err := PlanPorts(ctx, cfg)
	if err != nil {
		return rep, err
	}
	for _, ip := range plan.Addrs {
		for _, p := range plan.Ports {
			if err := fn(ip, p); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

func (c PortsConfig) blocklist() Blocklist {
	if c.AllowLoopback {
		return c.Blocklist.without(loopback)
	}
	return c.Blocklist
}

// targets lists the survey's addresses: the expanded targets, or the
// random draw.
func (c PortsConfig) targets(ctx context.Context) ([]portTarget, InputReport, error) {
	if c.Random == 0 {
		return expandTargets(ctx, c.Targets, c.Resolver)
	}
	r := NewRandom(c.Seed, c.Blocklist)
	out := make([]portTarget, 0, c.Random)
	for range c.Random {
		ip, ok := r.Next()
		if !ok {
			break
		}
		out = append(out, portTarget{ip: ip})
	}
	return out, InputReport{Read: len(out)}, nil
}

// RunPorts runs (or resumes) a port survey: one task per address, its
// ports tried one after another, a row per ip:port.
func RunPorts(ctx context.Context, cfg PortsConfig) (*Summary, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	params, _ := json.Marshal(map[string]any{"targets": cfg.Targets, "random": cfg.Random, "seed": cfg.Seed, "ports": cfg.Ports})
	var rep InputReport
	plan := func(ctx context.Context, st *state, cur run, _ *run) error {
		targets, r, err := cfg.targets(ctx)
		rep = r
		if err != nil {
			return err
		}
		for _, e := range rep.Errors {
			cfg.log().Warn("target skipped", "where", e)
		}
		bl := cfg.blocklist()
		now := cfg.now()
		var tasks []task
		var rows []row
		for i, t := range targets {
			seq := int64(i)
			if bl.Blocks(t.ip) || (t.name != "" && bl.BlocksHost(t.name)) {
				why := blockedWhy(bl, t.ip)
				if why == "" {
					why = "on the blocklist (" + t.name + ")"
				}
				for j, p := range cfg.Ports {
					rows = append(rows, portRow(seq, j, PortRow{IP: t.ip.String(), Port: p, State: PortExcluded, Error: why, Name: t.name, At: now}))
				}
				continue
			}
			tk := task{id: "p:" + t.ip.String(), seq: seq, ip: t.ip.String(), ports: cfg.Ports}
			if t.name != "" {
				tk.hosts = []hostEntry{{Domain: t.name}}
			}
			tasks = append(tasks, tk)
		}
		args := []any{"run", cur.name(), "addresses", len(targets), "ports", len(cfg.Ports), "excluded_rows", len(rows)}
		if cfg.Random > 0 {
			args = append(args, "seed", cfg.Seed)
		}
		cfg.log().Info("port survey planned", args...)
		return st.plan(ctx, cur, tasks, rows)
	}
	sum, err := cfg.Config.run(ctx, wire.SurveyPorts, string(params), plan, portRows)
	if sum != nil {
		sum.Input = rep
		sum.Seed = cfg.Seed
	}
	return sum, err
}

func portRow(seq int64, idx int, r PortRow) row {
	doc, _ := json.Marshal(r)
	return row{key: net.JoinHostPort(r.IP, strconv.Itoa(r.Port)), seq: seq<<16 | int64(idx), at: r.At, doc: doc}
}

// portRows turns one address's answer into a row per port.
func portRows(t *task, r *wire.SurveyResult) []row {
	name := ""
	if len(t.hosts) > 0 {
		name = t.hosts[0].Domain
	}
	got := map[int]wire.PortProbe{}
	for _, p := range r.Ports {
		got[p.Port] = p
	}
	out := make([]row, 0, len(t.ports))
	for i, port := range t.ports {
		p, ok := got[port]
		pr := PortRow{IP: t.ip, Port: port, State: p.State, Banner: p.Banner, Error: p.Error, Name: name, Supervisor: r.Supervisor, At: r.At}
		if !ok {
			pr.State, pr.Error = PortError, "no answer for the port: "+r.Error
		}
		if p.Latency > 0 {
			pr.Latency = seconds.Of(p.Latency)
		}
		out = append(out, portRow(t.seq, i, pr))
	}
	return out
}
