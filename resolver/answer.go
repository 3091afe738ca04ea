package resolver

import (
	"net/netip"
	"time"
)

// Classes of a name that did not resolve. Append only: they are written in
// survey rows and cross the wire in run summaries.
const (
	ClassNXDomain = "nxdomain" // the name does not exist
	ClassServFail = "servfail" // the server failed to answer (a broken delegation, DNSSEC failure, …)
	ClassTimeout  = "dns-timeout"
	ClassRefused  = "refused"
	ClassNoData   = "nodata" // the name exists but has no A or AAAA record
	ClassError    = "dns-error"
)

// Answer is what DNS said about one name. Class is "" when the name has at
// least one address.
type Answer struct {
	Class  string   `json:"class,omitempty"`
	Rcode  string   `json:"rcode,omitempty"`
	Error  string   `json:"error,omitempty"`
	CNAMEs []string `json:"cname,omitempty"` // the chain, in order, from the name to the one holding the addresses
	IPs    []string `json:"ips,omitempty"`   // A then AAAA, each sorted
	NS     []string `json:"ns,omitempty"`    // the name servers of the name's zone, sorted (Config.NS only)
	TTL    uint32   `json:"ttl"`             // the smallest TTL of the records the answer is made of

	// Set by a Cache: when the answer was had, and whether it came from
	// the cache rather than a query made for this look-up.
	At     time.Time `json:"-"`
	Cached bool      `json:"-"`
}

// Addrs returns the answer's addresses.
func (a Answer) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, s := range a.IPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// Negative reports an answer that says the name has no address (it does
// not exist, or has no A or AAAA record): a fact about the name, cached for
// its negative TTL.
func (a Answer) Negative() bool { return a.Class == ClassNXDomain || a.Class == ClassNoData }

// Failed reports an answer that says nothing about the name: the server
// failed, refused or did not answer in time.
func (a Answer) Failed() bool { return a.Class != "" && !a.Negative() }

// Err is the answer as an error for a caller that needs addresses, nil when
// it has some.
func (a Answer) Err(name string) error {
	if a.Class == "" {
		return nil
	}
	return &Error{Name: name, Class: a.Class, Rcode: a.Rcode, Detail: a.Error}
}

// Error is a name that gave no address. Callers branch on Class (or
// Timeout), never on the text.
type Error struct {
	Name   string
	Class  string
	Rcode  string
	Detail string
}

func (e *Error) Error() string {
	msg := "dns lookup of " + e.Name + ": " + e.Class
	if e.Rcode != "" && e.Class != ClassNXDomain {
		msg += " (" + e.Rcode + ")"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Timeout reports a name no server answered in time: worth asking again
// later, unlike a name that does not exist.
func (e *Error) Timeout() bool { return e.Class == ClassTimeout }

// Temporary reports a failure that says nothing about the name.
func (e *Error) Temporary() bool { return Answer{Class: e.Class}.Failed() }
