package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"backfill/seconds"
)

// Host surveys (package survey) run on the same cluster as a crawl: a
// survey's dispatcher sends SurveyTasks on a supervisor's task socket and
// gets SurveyResults back on its intake, alongside the usual Hello and
// Heartbeat. One task is one address (an IPv4 or IPv6 literal): every
// connection the task makes goes to that address, so a supervisor that
// works one task of an address at a time holds the per-address politeness
// rules without knowing anything else. They are few (one per address, not
// per page) and irregular, so they travel as JSON.

// Survey jobs. Append only: values cross the wire.
const (
	SurveyWeb   = "web"   // HEAD / (or a small ranged GET) to the domains an address serves
	SurveyPorts = "ports" // TCP connect to ports of an address
)

// SurveyTask asks a supervisor to probe one address.
type SurveyTask struct {
	ID    string `json:"id"`    // stable within a survey run
	Lease int64  `json:"lease"` // dispatch attempt; the result echoes it
	Job   string `json:"job"`   // SurveyWeb or SurveyPorts
	IP    string `json:"ip"`    // the one address every probe of the task connects to

	// Hosts are the domains that resolved to IP (web). The first is
	// probed; every one when Spec.EveryHost.
	Hosts []string `json:"hosts,omitempty"`
	// Ports are the TCP ports to try (ports).
	Ports []int `json:"ports,omitempty"`

	Spec SurveySpec `json:"spec"`
}

// SurveySpec is how to probe, set once by the survey's dispatcher so
// every supervisor probes alike.
type SurveySpec struct {
	Timeout      time.Duration `json:"timeout"`                 // ports: the connect timeout; web: one request, connect to last header byte
	Delay        time.Duration `json:"delay,omitempty"`         // between two connections to the address
	Rate         float64       `json:"rate,omitempty"`          // connections per second at this supervisor; 0: no cap
	Per24        int           `json:"per24,omitempty"`         // connections at once into one /24 (IPv6: /48); 0: no cap
	UserAgent    string        `json:"user_agent,omitempty"`    // sent by HTTP probes and banner requests
	Schemes      []string      `json:"schemes,omitempty"`       // web: "http", "https", in that order of probing
	Headers      []string      `json:"headers,omitempty"`       // web: response headers recorded besides Server
	EveryHost    bool          `json:"every_host,omitempty"`    // web: probe every host, not only the first
	MaxRedirects int           `json:"max_redirects,omitempty"` // web: redirects followed on the same host
	Banner       int           `json:"banner,omitempty"`        // ports: bytes of banner read from an open port; 0: none
	HTTPPort     int           `json:"http_port,omitempty"`     // web: the port of http probes; 0: 80
	HTTPSPort    int           `json:"https_port,omitempty"`    // web: the port of https probes; 0: 443
}

// SurveyResult answers one SurveyTask.
type SurveyResult struct {
	TaskID     string    `json:"task_id"`
	Lease      int64     `json:"lease"`
	Supervisor string    `json:"supervisor"`
	IP         string    `json:"ip"`
	Error      string    `json:"error,omitempty"` // the task could not be run at all (this supervisor does not survey)
	At         time.Time `json:"at"`

	Web   []WebProbe  `json:"web,omitempty"`   // one per host and scheme probed
	Ports []PortProbe `json:"ports,omitempty"` // one per port, in the task's order
}

// WebProbe is one HTTP(S) request's outcome. Class is "" when the server
// answered with an HTTP status; otherwise it says why not.
type WebProbe struct {
	Host      string            `json:"host"`
	Scheme    string            `json:"scheme"`
	Method    string            `json:"method,omitempty"` // HEAD, or GET when HEAD was refused
	Class     string            `json:"class,omitempty"`
	Error     string            `json:"error,omitempty"`
	Status    int               `json:"status,omitempty"`
	Server    string            `json:"server,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Redirects []string          `json:"redirects,omitempty"` // the Location of every redirect, in order
	FinalURL  string            `json:"final_url,omitempty"`
	Elapsed   time.Duration     `json:"-"`                // written as elapsed_seconds, see MarshalJSON
	Remote    string            `json:"remote,omitempty"` // ip:port that answered

	TLSVersion  string    `json:"tls_version,omitempty"`
	CertSubject string    `json:"cert_subject,omitempty"`
	CertIssuer  string    `json:"cert_issuer,omitempty"`
	CertExpiry  time.Time `json:"cert_expiry,omitzero"`
	CertError   string    `json:"cert_error,omitempty"` // why the certificate would not verify; "" when it does
}

// MarshalJSON writes the probe with its time as elapsed_seconds, a number
// of seconds: survey rows carry probes, and every duration a machine
// reads is written so (package seconds).
func (p WebProbe) MarshalJSON() ([]byte, error) {
	type fields WebProbe
	return json.Marshal(struct {
		fields
		ElapsedSeconds float64 `json:"elapsed_seconds"`
	}{fields(p), seconds.Of(p.Elapsed)})
}

// UnmarshalJSON reads what MarshalJSON writes, and the nanoseconds under
// "elapsed" of rows written by earlier builds (a rescan reads them).
func (p *WebProbe) UnmarshalJSON(b []byte) error {
	type fields WebProbe
	v := struct {
		*fields
		ElapsedSeconds *float64 `json:"elapsed_seconds"`
		ElapsedNanos   *int64   `json:"elapsed"`
	}{fields: (*fields)(p)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch {
	case v.ElapsedSeconds != nil:
		p.Elapsed = time.Duration(math.Round(*v.ElapsedSeconds * float64(time.Second)))
	case v.ElapsedNanos != nil:
		p.Elapsed = time.Duration(*v.ElapsedNanos)
	}
	return nil
}

// PortProbe is one TCP connect's outcome.
type PortProbe struct {
	Port    int           `json:"port"`
	State   string        `json:"state"` // open, closed, filtered, unreachable, excluded, error
	Latency time.Duration `json:"latency"`
	Banner  string        `json:"banner,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// normalize makes empty lists and maps nil, so a message decodes to the
// same value whether a peer wrote an empty list or left it out.
func (t *SurveyTask) normalize() {
	t.Hosts = nilIfEmpty(t.Hosts)
	t.Ports = nilIfEmpty(t.Ports)
	t.Spec.Schemes = nilIfEmpty(t.Spec.Schemes)
	t.Spec.Headers = nilIfEmpty(t.Spec.Headers)
}

// normalize makes empty lists nil and times UTC: an offset that happens to be the local zone's decodes
// to the local zone, and its next encoding reads back as UTC, so the same
// instant would cross the wire as two values.
func (r *SurveyResult) normalize() {
	r.Web = nilIfEmpty(r.Web)
	r.Ports = nilIfEmpty(r.Ports)
	r.At = r.At.UTC()
	for i := range r.Web {
		w := &r.Web[i]
		w.CertExpiry = w.CertExpiry.UTC()
		w.Redirects = nilIfEmpty(w.Redirects)
		if len(w.Headers) == 0 {
			w.Headers = nil
		}
	}
}

// check refuses times that are valid in their own zone but fall outside
// the years a timestamp can be written in once taken to UTC (year 0
// east of Greenwich is year -1): such a result could not be passed on.
func (r *SurveyResult) check() error {
	if !writable(r.At) {
		return fmt.Errorf("time %v out of range", r.At)
	}
	for _, w := range r.Web {
		if !writable(w.CertExpiry) {
			return fmt.Errorf("certificate expiry %v out of range", w.CertExpiry)
		}
	}
	return nil
}

// writable reports whether t can be written as an RFC 3339 timestamp.
func writable(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y <= 9999
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
