package survey

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"backfill/wire"
)

// topN is how many entries the summary's rankings keep.
const topN = 10

// Summary is what a survey run found, counted from its rows.
type Summary struct {
	Job      string      `json:"job"`
	Run      string      `json:"run"` // its name in the results store
	Resumed  bool        `json:"resumed,omitempty"`
	Finished bool        `json:"finished"`
	Rows     int         `json:"rows"`
	Elapsed  float64     `json:"elapsed_seconds"`
	Input    InputReport `json:"input"`
	Seed     uint64      `json:"seed,omitempty"` // of a random draw, to draw it again

	// web
	Outcomes  map[string]int `json:"outcomes,omitempty"` // answered, unresponsive, unresolved, excluded
	Classes   map[string]int `json:"classes,omitempty"`  // "outcome/class" of the rows not answered
	Addresses int            `json:"addresses,omitempty"`
	Probes    int            `json:"probes,omitempty"`     // HTTP probes made, one per address (or domain) and scheme: IP dedupe makes them fewer than the domains
	SharedIP  int            `json:"shared_ip,omitempty"`  // rows answered by another domain's probe on the same address
	Copied    int            `json:"copied,omitempty"`     // rows copied forward from the previous results
	DNSCached int            `json:"dns_cached,omitempty"` // domains answered by the DNS cache
	HTTPS     *HTTPSShare    `json:"https,omitempty"`
	Servers   []Count        `json:"servers,omitempty"`  // Server header products
	Versions  []Count        `json:"versions,omitempty"` // whole Server headers
	// CrossDomain counts answered domains whose redirects lead to another
	// registrable domain; RedirectTo ranks where.
	CrossDomain int     `json:"cross_domain_redirects"`
	RedirectTo  []Count `json:"redirect_to,omitempty"`
	TopNS       []Count `json:"top_ns,omitempty"` // domains per name server
	TopIPs      []Count `json:"top_ips,omitempty"`

	// ports
	States      map[string]int `json:"states,omitempty"`
	OpenPorts   []Count        `json:"open_ports,omitempty"`
	HostsOpen   int            `json:"hosts_with_open_ports,omitempty"`
	HostsProbed int            `json:"hosts,omitempty"`

	StorePending int           `json:"store_pending,omitempty"`
	Dispatch     dispatchStats `json:"dispatch"`
}

// HTTPSShare is how many answered domains answer over HTTPS.
type HTTPSShare struct {
	Answered int     `json:"answered"`
	HTTPS    int     `json:"https"`
	Share    float64 `json:"share"`
}

// Count is a name and how often it was seen.
type Count struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func summarize(ctx context.Context, st *state, cur run) (*Summary, error) {
	s := &Summary{Job: cur.job, Run: cur.name()}
	tally := map[string]map[string]int{}
	count := func(kind, name string) {
		if tally[kind] == nil {
			tally[kind] = map[string]int{}
		}
		tally[kind][name]++
	}
	hosts := map[string]bool{}
	open := map[string]bool{}
	err := st.rows(ctx, cur, func(w row) error {
		s.Rows++
		switch cur.job {
		case wire.SurveyWeb:
			var r WebRow
			if err := json.Unmarshal(w.doc, &r); err != nil {
				return fmt.Errorf("survey: row %s: %w", w.key, err)
			}
			s.webRow(r, count)
		case wire.SurveyPorts:
			var r PortRow
			if err := json.Unmarshal(w.doc, &r); err != nil {
				return fmt.Errorf("survey: row %s: %w", w.key, err)
			}
			count("state", r.State)
			hosts[r.IP] = true
			if r.State == PortOpen {
				open[r.IP] = true
				count("open", fmt.Sprint(r.Port))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch cur.job {
	case wire.SurveyWeb:
		s.Outcomes = tally["outcome"]
		s.Classes = tally["class"]
		s.Addresses = len(tally["ip"])
		s.Servers, s.Versions = top(tally["server"]), top(tally["version"])
		s.RedirectTo, s.TopNS, s.TopIPs = top(tally["redirect"]), top(tally["ns"]), top(tally["ip"])
		if s.HTTPS != nil && s.HTTPS.Answered > 0 {
			s.HTTPS.Share = float64(s.HTTPS.HTTPS) / float64(s.HTTPS.Answered)
		}
	case wire.SurveyPorts:
		s.States = tally["state"]
		s.OpenPorts = top(tally["open"])
		s.HostsProbed, s.HostsOpen = len(hosts), len(open)
	}
	return s, nil
}

func (s *Summary) webRow(r WebRow, count func(kind, name string)) {
	count("outcome", r.Outcome)
	if r.Class != "" {
		count("class", r.Outcome+"/"+r.Class)
	}
	if r.DNSCached {
		s.DNSCached++
	}
	for _, ns := range r.DNS.NS {
		count("ns", ns)
	}
	if r.CopiedFrom != "" {
		s.Copied++
	}
	if r.IP != "" {
		count("ip", r.IP)
	}
	if r.SharedIP {
		s.SharedIP++
	} else if r.CopiedFrom == "" {
		s.Probes += len(r.Probes)
	}
	if r.Outcome != Answered {
		return
	}
	if s.HTTPS == nil {
		s.HTTPS = &HTTPSShare{}
	}
	s.HTTPS.Answered++
	for _, p := range r.Probes {
		if p.Scheme == "https" && p.Class == "" {
			s.HTTPS.HTTPS++
			break
		}
	}
	p := r.primary()
	if p.Server != "" {
		product, _, _ := strings.Cut(p.Server, " ")
		product, _, _ = strings.Cut(product, "/")
		count("server", product)
		count("version", p.Server)
	}
	probed := r.Domain
	if r.SharedIP {
		probed = r.ProbedAs // the final URL is that domain's
	}
	if to := crossDomain(probed, p.FinalURL); to != "" {
		s.CrossDomain++
		count("redirect", to)
	}
}

// crossDomain returns the registrable domain a final URL is on when it
// is not the domain's own, else "".
func crossDomain(domain, final string) string {
	if final == "" {
		return ""
	}
	u, err := url.Parse(final)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	own, err1 := publicsuffix.EffectiveTLDPlusOne(domain)
	to, err2 := publicsuffix.EffectiveTLDPlusOne(strings.ToLower(u.Hostname()))
	if err1 != nil || err2 != nil || own == to {
		return ""
	}
	return to
}

// top ranks a tally: most first, then by name, the first topN.
func top(m map[string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Name < out[j].Name
	})
	return out[:min(len(out), topN)]
}

// WriteText writes the summary for a person.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	state := "finished"
	if !s.Finished {
		state = "interrupted (run it again with the same state directory to go on)"
	}
	took := time.Duration(s.Elapsed * float64(time.Second)).Round(time.Millisecond)
	fmt.Fprintf(&b, "survey %s: %d rows in %s, %s", s.Run, s.Rows, took, state)
	if s.Resumed {
		b.WriteString(", resumed")
	}
	b.WriteString("\n")
	if s.Input.Bad > 0 || s.Input.Dups > 0 {
		fmt.Fprintf(&b, "  input: %d kept, %d malformed lines skipped, %d repeated\n", s.Input.Read, s.Input.Bad, s.Input.Dups)
		for _, e := range s.Input.Errors {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	switch s.Job {
	case wire.SurveyWeb:
		fmt.Fprintf(&b, "  outcomes: %s\n", pairs(s.Outcomes, []string{Answered, Unresponsive, Unresolved, Excluded}))
		if len(s.Classes) > 0 {
			fmt.Fprintf(&b, "  not answered: %s\n", pairs(s.Classes, nil))
		}
		fmt.Fprintf(&b, "  addresses: %d; HTTP probes: %d; rows sharing an address's probe: %d; copied from before: %d; DNS from cache: %d\n",
			s.Addresses, s.Probes, s.SharedIP, s.Copied, s.DNSCached)
		if s.HTTPS != nil {
			fmt.Fprintf(&b, "  HTTPS: %d of %d answered domains (%.1f%%)\n", s.HTTPS.HTTPS, s.HTTPS.Answered, 100*s.HTTPS.Share)
		}
		fmt.Fprintf(&b, "  redirects to another domain: %d%s\n", s.CrossDomain, counts(" (", s.RedirectTo, ")"))
		fmt.Fprintf(&b, "  servers: %s\n", counts("", s.Servers, ""))
		fmt.Fprintf(&b, "  server versions: %s\n", counts("", s.Versions, ""))
		fmt.Fprintf(&b, "  domains per name server: %s\n", counts("", s.TopNS, ""))
		fmt.Fprintf(&b, "  domains per address: %s\n", counts("", s.TopIPs, ""))
	case wire.SurveyPorts:
		fmt.Fprintf(&b, "  states: %s\n", pairs(s.States, []string{PortOpen, PortClosed, PortFiltered, PortUnreachable, PortExcluded, PortError}))
		fmt.Fprintf(&b, "  hosts: %d probed, %d with an open port\n", s.HostsProbed, s.HostsOpen)
		fmt.Fprintf(&b, "  open ports: %s\n", counts("", s.OpenPorts, ""))
	}
	d := s.Dispatch
	fmt.Fprintf(&b, "  supervisors: %d joined, %d dropped, %d refused; tasks sent again: %d\n", d.Members, d.Dropped, d.Refused, d.Resent)
	if d.Forged > 0 || len(d.Quarantined) > 0 {
		fmt.Fprintf(&b, "  forged frames refused: %d; keys quarantined: %d (see the log)\n", d.Forged, len(d.Quarantined))
	}
	if s.StorePending != 0 {
		fmt.Fprintf(&b, "  rows not yet in the results store: %d (sent on the next start)\n", s.StorePending)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pairs prints a tally in the given order of keys, then the others.
func pairs(m map[string]int, order []string) string {
	var parts []string
	done := map[string]bool{}
	for _, k := range order {
		done[k] = true
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	for _, c := range top(m) {
		if !done[c.Name] {
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.N))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func counts(pre string, cs []Count, post string) string {
	if len(cs) == 0 {
		if pre == "" {
			return "none"
		}
		return ""
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %d", c.Name, c.N)
	}
	return pre + strings.Join(parts, ", ") + post
}
