package wire

import (
	"encoding/json"
	"time"
)

// Version is the protocol version carried in every frame. A frame of any
// other version is refused by Decode. Version 2 encodes Tasks and Results
// compactly (see binary.go); other messages are JSON.
const Version = 2

// Kind says what a frame carries. Append only: values cross the wire.
type Kind uint8

const (
	KindHello     Kind = 1 // supervisor → dispatcher: I exist, send me work here
	KindHeartbeat Kind = 2 // supervisor → dispatcher: still alive, with counters
	KindWelcome   Kind = 3 // dispatcher → supervisor: registered
	KindTask      Kind = 4 // dispatcher → supervisor: fetch and extract one URL
	KindResult    Kind = 5 // supervisor → dispatcher: what one task produced

	KindSurveyTask   Kind = 6 // survey dispatcher → supervisor: probe one address (survey.go)
	KindSurveyResult Kind = 7 // supervisor → survey dispatcher: what the probes found
	KindBye          Kind = 8 // dispatcher → supervisor: the run is finished, no more tasks
	KindRenew        Kind = 9 // dispatcher → supervisor: heartbeat heard, the member's hold on its hosts renewed
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindHeartbeat:
		return "heartbeat"
	case KindWelcome:
		return "welcome"
	case KindTask:
		return "task"
	case KindResult:
		return "result"
	case KindSurveyTask:
		return "survey-task"
	case KindSurveyResult:
		return "survey-result"
	case KindBye:
		return "bye"
	case KindRenew:
		return "renew"
	}
	return "unknown"
}

// Hello registers a supervisor. It is sent at start (repeated with back-off
// until a Welcome arrives) and its fields are repeated in every Heartbeat,
// so a dispatcher that restarted learns its members again from heartbeats.
type Hello struct {
	Supervisor string    `json:"supervisor"` // stable name, unique in the cluster
	Endpoint   string    `json:"endpoint"`   // where the supervisor's task socket listens, dialable by the dispatcher
	Capacity   int       `json:"capacity"`   // most tasks it accepts in flight
	Render     bool      `json:"render,omitempty"`
	Mappings   string    `json:"mappings"` // digest of the mapping set it loaded; must equal the dispatcher's
	Started    time.Time `json:"started"`  // incarnation: a new value means the process restarted

	// Key is the supervisor's CURVE public key (Z85) when the cluster is
	// secured: its task socket is a CURVE server with that key, so the
	// dispatcher needs it to dial. Empty in plaintext.
	Key string `json:"key,omitempty"`

	// Survey says the supervisor runs host-survey tasks (SurveyTask).
	Survey bool `json:"survey,omitempty"`

	// Seq numbers this Hello or Heartbeat among those of its sender's
	// incarnation, so that a Welcome or Renew can say which one it
	// answers: the member's hold on its hosts runs from when that one was
	// sent (see Renew).
	Seq uint64 `json:"seq,omitempty"`
	// MaxRequest is the longest one of its requests may take (its fetch
	// deadline, or a render's): after a member is lost, its hosts wait
	// out its lease and this before another member asks them anything.
	MaxRequest time.Duration `json:"max_request,omitempty"`
	// Busy lists the hosts it has a request in flight to as it speaks
	// (at most its workers): a dispatcher that just started, and knows
	// nothing of what the member held, gives such a host to another
	// member only once that request is surely over (MaxRequest).
	Busy []string `json:"busy,omitempty"`
	// DefaultDelay is the pause the supervisor keeps between two requests
	// to a host whose robots.txt names no Crawl-delay (0: none), and
	// Workers how many requests it makes at once (0: a build that does
	// not say, and then DefaultDelay says nothing either): the
	// dispatcher's guess of a host's pace before the host's first result
	// says it, and of the requests the crawl can have in flight, for how
	// long the crawl will take.
	DefaultDelay time.Duration `json:"default_delay,omitempty"`
	Workers      int           `json:"workers,omitempty"`
}

// Heartbeat repeats Hello and adds live counters.
type Heartbeat struct {
	Hello
	InFlight int       `json:"in_flight"`
	Fetched  int64     `json:"fetched"`
	Failed   int64     `json:"failed"`
	RSS      uint64    `json:"rss"`
	At       time.Time `json:"at"`

	// RenderRSS is the memory of a render node's browser, its whole
	// process tree: the proportional set size where the kernel reports
	// it, else the resident set size. 0 on other supervisors.
	RenderRSS uint64 `json:"render_rss,omitempty"`

	// What operators watch (appended; older peers omit it). Rendered
	// counts the pages the browser loaded. Robots counts the robots.txt
	// requests by outcome (the supervisor's RobotsOutcome values). Hosts
	// are a bounded selection of the hosts this supervisor asked
	// something: the busiest, the slowest to answer and those whose
	// requests came closest together for their delay. Backoff lists
	// hosts whose requests are held back by trouble, latest end first.
	Rendered int64            `json:"rendered,omitempty"`
	Robots   map[string]int64 `json:"robots,omitempty"`
	Hosts    []HostPace       `json:"hosts,omitempty"`
	Backoff  []HostBackoff    `json:"backoff,omitempty"`

	// Surveys are the IDs of the survey tasks (SurveyTask) the supervisor
	// holds, running or waiting for their address's turn: a survey's
	// dispatcher renews their leases, so a task outlasts its lease only
	// when its supervisor no longer has it.
	Surveys []string `json:"surveys,omitempty"`

	// DNS is what the supervisor's name resolution did since it started
	// (appended; older peers and supervisors without a resolver of their
	// own omit it).
	DNS *DNSStats `json:"dns,omitempty"`

	// Politeness, since the supervisor started (appended): the most
	// requests ever in flight to one host at once (1 when every host had
	// one at a time), and requests that went out again without being
	// asked (0: nothing below the politeness rules retries on its own).
	HostInFlight int   `json:"host_in_flight,omitempty"`
	Repeated     int64 `json:"repeated,omitempty"`
	// Retried counts pages asked again, as requests of their own after
	// the host's delay, because a kept-alive connection lost the request
	// before any answer.
	Retried int64 `json:"retried,omitempty"`
}

// DNSStats counts a process's DNS look-ups and queries (package resolver's
// Stats, as operators see them).
type DNSStats struct {
	// Source names the process whose resolver this is: supervisors of
	// one process share it, and a sum counts it once.
	Source    string  `json:"source,omitempty"`
	Lookups   int64   `json:"lookups"`    // names looked up
	Cached    int64   `json:"cached"`     // answered from the cache (memory or the state's file), or by a look-up of the same name in progress
	Queries   int64   `json:"queries"`    // DNS queries sent, retries included
	Timeouts  int64   `json:"timeouts"`   // queries not answered in time
	InFlight  int     `json:"in_flight"`  // queries in flight
	LatencyMS float64 `json:"latency_ms"` // mean time to an answer
}

// Add sums o into s (a dispatcher's view of its members).
func (s *DNSStats) Add(o DNSStats) {
	s.Lookups += o.Lookups
	s.Cached += o.Cached
	s.Queries += o.Queries
	s.Timeouts += o.Timeouts
	s.InFlight += o.InFlight
	if n := s.Queries; n > 0 {
		s.LatencyMS = (s.LatencyMS*float64(n-o.Queries) + o.LatencyMS*float64(o.Queries)) / float64(n)
	}
}

// HostPace is how one supervisor's requests to one host went, since the
// supervisor started. Durations are in seconds.
type HostPace struct {
	Host     string    `json:"host"`
	Requests int64     `json:"requests"` // pages, robots.txt and probes
	First    time.Time `json:"first"`    // start of the first request
	Last     time.Time `json:"last"`     // start of the latest request
	// PeakMinute is the most requests started in one clock minute.
	PeakMinute int `json:"peak_minute"`
	// MinGap is the shortest time between the starts of two consecutive
	// requests (0 with fewer than two), and GapDelay the delay the host
	// was owed then: politeness holds while MinGap >= GapDelay.
	MinGap   float64 `json:"min_gap_seconds,omitempty"`
	GapDelay float64 `json:"gap_delay_seconds,omitempty"`
	// Seconds is the time the requests took in all, MaxSeconds the
	// longest one's.
	Seconds    float64 `json:"total_seconds,omitempty"`
	MaxSeconds float64 `json:"max_seconds,omitempty"`
}

// UnmarshalJSON reads a pace, and the names an earlier build wrote
// (min_gap_s, gap_delay_s, seconds, max_s), which a history file kept
// across an upgrade still holds.
func (p *HostPace) UnmarshalJSON(b []byte) error {
	type fields HostPace
	v := struct {
		*fields
		OldMinGap   *float64 `json:"min_gap_s"`
		OldGapDelay *float64 `json:"gap_delay_s"`
		OldSeconds  *float64 `json:"seconds"`
		OldMax      *float64 `json:"max_s"`
	}{fields: (*fields)(p)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	for _, f := range []struct {
		dst *float64
		old *float64
	}{{&p.MinGap, v.OldMinGap}, {&p.GapDelay, v.OldGapDelay}, {&p.Seconds, v.OldSeconds}, {&p.MaxSeconds, v.OldMax}} {
		if f.old != nil && *f.dst == 0 {
			*f.dst = *f.old
		}
	}
	return nil
}

// HostBackoff is a host whose requests wait because it is in trouble.
type HostBackoff struct {
	Host     string    `json:"host"`
	Until    time.Time `json:"until"`
	Class    string    `json:"class,omitempty"` // the failure that set the wait
	Failures int       `json:"failures"`        // in a row
	Why      string    `json:"why,omitempty"`
}

// Welcome acknowledges a Hello on the supervisor's task socket. Seq and
// Lease grant the member's hold on its hosts as a Renew does; a zero
// Lease grants nothing (a dispatcher that fences nothing, a survey's).
type Welcome struct {
	Dispatcher string        `json:"dispatcher"`
	Run        string        `json:"run"`
	Seq        uint64        `json:"seq,omitempty"`
	Lease      time.Duration `json:"lease,omitempty"`
	// Gen numbers the dispatcher process (it grows with every restart
	// on one state): a member welcomed by a new process drops the tasks
	// it still queues from the old one, which the new one sends again,
	// maybe to another member. 0 from a dispatcher that does not say.
	Gen int64 `json:"gen,omitempty"`
	// Member is the name the dispatcher knows the member by: in a secured
	// cluster its key's, whatever name its Hello carried (appended; older
	// dispatchers omit it).
	Member string `json:"member,omitempty"`
}

// Renew answers a Heartbeat: the dispatcher heard the one numbered Seq,
// and the member may go on asking the hosts it holds until Lease after it
// sent that heartbeat (its own clock: no clock is compared across
// machines). A member that is not renewed in time stops starting
// requests and, at the end of its lease, drops the tasks it holds; the
// dispatcher gives its hosts to another member only after the lease and
// the member's longest request (Hello.MaxRequest) have passed, so two
// members never ask one host at once, cut off from each other or not.
type Renew struct {
	Seq   uint64        `json:"seq"`
	Lease time.Duration `json:"lease"`
}

// Bye tells a member that the dispatcher's run is finished: no task will
// come. A supervisor exits on it when asked to (ExitWhenDone), else waits
// quietly for the next run. A dispatcher that is stopped, not finished,
// says nothing: it will resume.
type Bye struct {
	Dispatcher string `json:"dispatcher"`
	Run        string `json:"run"`
}

// Task asks a supervisor to fetch one URL and run the mappings on it.
type Task struct {
	ID     string `json:"id"`    // stable for the URL within a run
	Lease  int64  `json:"lease"` // dispatch attempt; a Result echoes it
	URL    string `json:"url"`
	Host   string `json:"host"` // lower-case host[:port] the politeness rules apply to
	Depth  int    `json:"depth"`
	Render bool   `json:"render,omitempty"`

	// The validators of the page's last successful fetch, when the
	// dispatcher fetches it again (see its recrawl age): the supervisor
	// sends them as If-None-Match and If-Modified-Since, and a 304 comes
	// back as a Result marked NotModified. Empty on a first fetch.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`

	// HostLast hands a host's politeness over when it changes owner (a
	// supervisor joined, left or died): the latest time a request to the
	// host may have ended under its previous owner, as the dispatcher
	// knows it. The new owner waits the host's delay from it even when it
	// shares no last-crawl cache with the old one. Zero when the host has
	// not moved.
	HostLast time.Time `json:"host_last,omitzero"`

	// Hops counts the redirects across hosts that led to URL: a page
	// whose redirect goes to another host is answered with it
	// (Result.Redirect) and the target comes back as a task of its own,
	// for its host's owner, with the count; the supervisor's redirect
	// limit counts them with the hops it follows on URL's host.
	Hops int `json:"hops,omitempty"`
}

// Result is what a supervisor found for one Task.
type Result struct {
	TaskID     string    `json:"task_id"`
	Lease      int64     `json:"lease"`
	Supervisor string    `json:"supervisor"`
	URL        string    `json:"url"`
	FinalURL   string    `json:"final_url,omitempty"`
	Status     int       `json:"status,omitempty"`
	Class      string    `json:"class,omitempty"` // "" when the page was fetched and processed; else a failure class
	Error      string    `json:"error,omitempty"`
	Bytes      int64     `json:"bytes,omitempty"`
	FetchedAt  time.Time `json:"fetched_at"`
	Mappings   []string  `json:"mappings,omitempty"` // mappings whose url_patterns matched
	Fields     []Field   `json:"fields,omitempty"`
	Links      []Link    `json:"links,omitempty"`
	FieldErrs  []string  `json:"field_errors,omitempty"` // "mapping/field/processor: reason"

	// The page's content fingerprint (etl.Fingerprint) for the
	// dispatcher's content-seen test; empty on a failed task. TextHash is
	// the hash of the normalized text (16 bytes), Simhash its 64-bit
	// simhash, Words its word count.
	TextHash []byte `json:"text_hash,omitempty"`
	Simhash  uint64 `json:"simhash,omitempty"`
	Words    int    `json:"words,omitempty"`

	// NotModified says the server answered a conditional request with 304:
	// the page is what it was when the dispatcher last fetched it, and the
	// Result carries no fields or links; the dispatcher answers from its
	// cached extraction. ETag and LastModified are the page's validators
	// as the server sent them (on a 200, or a 304 that repeats them), for
	// the next conditional request.
	NotModified  bool   `json:"not_modified,omitempty"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`

	// TLSError is the problem of the page's certificate, fetched anyway
	// under the supervisor's --insecure-tls (fetch.Response.TLSError):
	// the values it gives carry it to the export.
	TLSError string `json:"tls_error,omitempty"`

	// JSOnly says the page's HTML looks like a shell that JavaScript
	// fills in (etl.JSOnly), on a page a mapping with url_patterns
	// matched: the dispatcher renders it when a record still needs what
	// the HTML did not give.
	JSOnly bool `json:"js_only,omitempty"`

	// A request that the server sent elsewhere: Chain lists the URLs
	// requested for the task before FinalURL, first the task's own
	// (empty when the first answer was the page). Every hop is a request
	// of its own under its host's rules: the supervisor makes those on
	// the task's host itself, after the host's delay; a hop to another
	// host is not made here but answered in Redirect (its normalized
	// target), for the dispatcher to queue as a task of that host, with
	// the records of this one. Such a Result has no Class and no
	// values; Status is the redirect's.
	Chain    []string `json:"chain,omitempty"`
	Redirect string   `json:"redirect,omitempty"`
	// HopRefused says why the task's last hop was not made, when a
	// redirect led to its answer: RedirectRobots, RedirectAddress,
	// RedirectLoop or RedirectTooMany.
	HopRefused string `json:"hop_refused,omitempty"`

	// The host's pace as the supervisor keeps it, for the dispatcher to
	// send the host's next task when it can go (not to have it wait in
	// a lease): Delay is the gap the host asks between two requests
	// (robots.txt's Crawl-delay or the default), Ready how long after
	// this Result was sent the host may take its next request (its
	// delay still to run, or a back-off). Zero when unknown.
	Delay time.Duration `json:"delay,omitempty"`
	Ready time.Duration `json:"ready,omitempty"`
}

// What became of a redirect (or meta refresh), as the crawl's summary
// counts them (from the Results: Chain, Redirect, HopRefused). Append
// only.
const (
	RedirectFollowed  = "followed"   // requested, after its host's delay
	RedirectOtherHost = "other-host" // to another host: answered for the dispatcher to queue there
	RedirectRobots    = "robots"     // robots.txt of its host disallows the target
	RedirectBlacklist = "blacklist"  // its host is on the blacklist
	RedirectAddress   = "address"    // its address is refused (the guard, a deny list)
	RedirectLoop      = "loop"       // the target was visited in the same chain
	RedirectTooMany   = "too-many"   // the chain passed the redirect limit
)

// ClassDeferred is the class of a Result that answers a task without a
// request because its host cannot take one for a while (robots.txt was
// just read, and the host's delay runs from there): the dispatcher
// queues the task again for when the host is ready (Result.Ready), so
// that it waits as an entry of the dispatcher's time-ordered queue, not
// in a lease and a supervisor's slot.
const ClassDeferred = "deferred"

// Field is one mapping field's values on a page.
type Field struct {
	Mapping string   `json:"mapping"`
	Name    string   `json:"name"`
	Values  []string `json:"values"`
	Match   bool     `json:"match,omitempty"` // a match key (attribution)
}

// Link is an absolute, normalized http(s) URL found on a page.
type Link struct {
	URL    string `json:"url"`
	Parsed bool   `json:"parsed,omitempty"` // yielded by a mapping's url_parsers
	// Text is what the page's anchor says of the link (etl's
	// Extraction.Anchors: at most etl.MaxAnchorText bytes), which the
	// dispatcher's frontier compares with what a record knows; "" when
	// the page has no anchor text for it.
	Text string `json:"text,omitempty"`
}

// MaxResultLinks bounds the links one Result carries, parsed links
// first; a page with more is a link farm or a trap, and the frame must
// stay small.
const MaxResultLinks = 10000

// MergeLinks lists parsed links (Parsed) then other outbound links, each
// URL once, at most limit of them, each with its anchor text (texts[i]
// is out[i]'s; a parsed link takes the text of the same URL among out).
func MergeLinks(parsed, out, texts []string, limit int) []Link {
	if len(parsed)+len(out) == 0 {
		return nil
	}
	text := func(i int) string {
		if i < len(texts) {
			return texts[i]
		}
		return ""
	}
	var outText map[string]string
	if len(parsed) > 0 && len(texts) > 0 {
		outText = make(map[string]string, len(out))
		for i, l := range out {
			if t := text(i); t != "" {
				outText[l] = t
			}
		}
	}
	seen := make(map[string]bool, len(parsed)+len(out))
	links := make([]Link, 0, min(len(parsed)+len(out), limit))
	for i, list := range [][]string{parsed, out} {
		for j, l := range list {
			if len(links) >= limit {
				return links
			}
			if l == "" || seen[l] {
				continue
			}
			seen[l] = true
			link := Link{URL: l, Parsed: i == 0}
			if i == 0 {
				link.Text = outText[l]
			} else {
				link.Text = text(j)
			}
			links = append(links, link)
		}
	}
	return links
}
