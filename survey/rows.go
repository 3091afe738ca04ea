package survey

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"backfill/resolver"
	"backfill/seconds"
	"backfill/wire"
)

// Outcome classes of a domain in a web survey, kept apart as the survey's
// seed insists. Append only: they are written in survey rows.
const (
	Unresolved   = "unresolved"   // DNS said no, or failed: Class says how
	Unresponsive = "unresponsive" // resolved, but no HTTP answer: Class says how
	Answered     = "answered"     // an HTTP status came back
	Excluded     = "excluded"     // on the blocklist (never looked up), or resolved to an address the survey may not connect to
)

// WebBlocklisted is the Class of a domain the user's blocklist names: it
// is neither looked up nor probed.
const WebBlocklisted = "blocklisted"

// WebRow is one domain's line of a web survey (docs/survey.md has the
// schema).
type WebRow struct {
	Domain     string          `json:"domain"`
	Outcome    string          `json:"outcome"`
	Class      string          `json:"class,omitempty"`
	IP         string          `json:"ip,omitempty"`         // the address probed
	SharedIP   bool            `json:"shared_ip,omitempty"`  // the probes are those of ProbedAs, on the same address
	ProbedAs   string          `json:"probed_as,omitempty"`  // with SharedIP: the domain that was probed
	DNS        resolver.Answer `json:"dns"`                  // what DNS said
	DNSCached  bool            `json:"dns_cached,omitempty"` // the answer came from the state's DNS cache
	DNSAt      time.Time       `json:"dns_at,omitzero"`
	Probes     []wire.WebProbe `json:"probes,omitempty"` // one per scheme
	Supervisor string          `json:"supervisor,omitempty"`
	At         time.Time       `json:"at"`
	CopiedFrom string          `json:"copied_from,omitempty"` // incremental rescans: the run or file the row was copied from
	Listed     string          `json:"listed,omitempty"`      // class blocklisted: where the blocklist names the domain (file:line)
}

// PortRow is one ip:port's line of a port survey.
type PortRow struct {
	IP         string    `json:"ip"`
	Port       int       `json:"port"`
	State      string    `json:"state"`
	Latency    float64   `json:"latency_seconds,omitempty"` // seconds (package seconds)
	Banner     string    `json:"banner,omitempty"`
	Error      string    `json:"error,omitempty"`
	Name       string    `json:"name,omitempty"` // the target name the address came from
	Supervisor string    `json:"supervisor,omitempty"`
	At         time.Time `json:"at"`
}

// primary is the probe a one-line summary of the row shows: the first
// that answered, else the first.
func (r WebRow) primary() wire.WebProbe {
	for _, p := range r.Probes {
		if p.Class == "" {
			return p
		}
	}
	if len(r.Probes) > 0 {
		return r.Probes[0]
	}
	return wire.WebProbe{}
}

// webCSVHeader is the column list of a web survey as CSV.
var webCSVHeader = []string{"domain", "outcome", "class", "ip", "shared_ip", "probed_as", "scheme", "method", "status", "server",
	"final_url", "redirects", "tls_version", "cert_subject", "cert_issuer", "cert_expiry", "cert_error", "elapsed_seconds",
	"cname", "ips", "ns", "dns_cached", "supervisor", "at", "copied_from"}

func (r WebRow) csv() []string {
	p := r.primary()
	expiry := ""
	if !p.CertExpiry.IsZero() {
		expiry = p.CertExpiry.Format(time.RFC3339)
	}
	elapsed := ""
	if p.Scheme != "" {
		elapsed = secs(seconds.Of(p.Elapsed))
	}
	status := ""
	if p.Status != 0 {
		status = strconv.Itoa(p.Status)
	}
	return []string{r.Domain, r.Outcome, r.Class, r.IP, boolText(r.SharedIP), r.ProbedAs, p.Scheme, p.Method, status, p.Server,
		p.FinalURL, strings.Join(p.Redirects, " "), p.TLSVersion, p.CertSubject, p.CertIssuer, expiry, p.CertError, elapsed,
		strings.Join(r.DNS.CNAMEs, " "), strings.Join(r.DNS.IPs, " "), strings.Join(r.DNS.NS, " "), boolText(r.DNSCached),
		r.Supervisor, r.At.Format(time.RFC3339Nano), r.CopiedFrom}
}

var portCSVHeader = []string{"ip", "port", "state", "latency_seconds", "banner", "error", "name", "supervisor", "at"}

func (r PortRow) csv() []string {
	lat := ""
	if r.Latency > 0 {
		lat = secs(r.Latency)
	}
	return []string{r.IP, strconv.Itoa(r.Port), r.State, lat, r.Banner, r.Error, r.Name, r.Supervisor, r.At.Format(time.RFC3339Nano)}
}

// secs writes seconds as the JSON rows do: shortest form, no exponent.
func secs(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64)
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return ""
}

// csvRow decodes a stored row of job into its CSV columns.
func csvRow(job string, doc []byte) ([]string, error) {
	switch job {
	case wire.SurveyWeb:
		var r WebRow
		if err := json.Unmarshal(doc, &r); err != nil {
			return nil, err
		}
		return r.csv(), nil
	case wire.SurveyPorts:
		var r PortRow
		if err := json.Unmarshal(doc, &r); err != nil {
			return nil, err
		}
		return r.csv(), nil
	}
	return nil, fmt.Errorf("unknown survey job %q", job)
}

func csvHeader(job string) []string {
	if job == wire.SurveyPorts {
		return portCSVHeader
	}
	return webCSVHeader
}
