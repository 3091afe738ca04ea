package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"backfill/dispatcher"
	"backfill/statuspage"
)

// cmdStatus prints what the dispatcher whose state directory is given last
// wrote to its status file, or what a remote dispatcher's status page
// serves (--from): its members with their rates, the queue depths and the
// records complete. With --watch it prints again every interval until
// interrupted.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	stateDir := new(string)
	stateDirFlag(fs, stateDir, defaultStateDir, "the dispatcher's state directory (run this on the dispatcher's machine)")
	from := fs.String("from", "", "read the status from a dispatcher's --status (or --metrics) listener, e.g. http://10.0.0.2:9100/, instead of --state-dir")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	watch := fs.Duration("watch", 0, "print again every interval until interrupted (e.g. 2s); 0 prints once")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *watch < 0 {
		return fmt.Errorf("%w: --watch must not be negative", errUsage)
	}
	read := func() (dispatcher.Status, error) { return readStatusFile(*stateDir) }
	if *from != "" {
		u, err := statusURL(*from)
		if err != nil {
			return err
		}
		read = func() (dispatcher.Status, error) { return fetchStatus(ctx, u) }
	}
	for {
		s, err := read()
		if err != nil {
			return err
		}
		if err := printStatus(stdout, s, *asJSON, time.Now()); err != nil {
			return err
		}
		if *watch == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*watch):
		}
		fmt.Fprintln(stdout)
	}
}

func readStatusFile(dir string) (dispatcher.Status, error) {
	s, err := dispatcher.ReadStatus(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("no dispatcher status in %s: has a dispatcher run with --state-dir %s?", dir, dir)
	}
	return s, err
}

// statusURL is the status JSON's URL under a listener's base URL (or
// that URL itself when it names the JSON).
func statusURL(from string) (string, error) {
	u, err := url.Parse(from)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: --from %q: want the http(s) URL of a dispatcher's --status or --metrics listener", errUsage, from)
	}
	if !strings.HasSuffix(u.Path, statuspage.JSONPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + statuspage.JSONPath
	}
	return u.String(), nil
}

// statusTimeout bounds one request for a remote status.
const statusTimeout = 10 * time.Second

// fetchStatus reads a remote dispatcher's status.
func fetchStatus(ctx context.Context, u string) (dispatcher.Status, error) {
	var s dispatcher.Status
	if err := getJSON(ctx, u, &s); err != nil {
		return s, fmt.Errorf("status from %s: %w", u, err)
	}
	return s, nil
}

// getJSON GETs u, within statusTimeout, into v: a dispatcher's status or
// its feed.
func getJSON(ctx context.Context, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxStatusBody)).Decode(v)
}

// maxStatusBody bounds a remote status: the timeline and the lists in it
// are bounded, far below this.
const maxStatusBody = 16 << 20

func printStatus(w io.Writer, s dispatcher.Status, asJSON bool, now time.Time) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	age := now.Sub(s.Updated)
	state := s.State
	// A running dispatcher rewrites the file every second; one that has not
	// for a while was killed or is wedged.
	if state == dispatcher.StateRunning && age > 10*dispatcher.StatusEvery {
		state = fmt.Sprintf("not responding (last update %s ago)", age.Round(time.Second))
	}
	fmt.Fprintf(w, "dispatcher %s  run %s  %s\n", s.Dispatcher, s.Run, state)
	fmt.Fprintf(w, "intake     %s  started %s  updated %s ago\n", endpointText(s.Endpoint),
		s.Started.Local().Format(time.DateTime), age.Round(100*time.Millisecond))
	untouched := s.Records - s.Complete - s.Partial
	pct := 0.0
	if s.Records > 0 {
		pct = 100 * float64(s.Complete) / float64(s.Records)
	}
	fmt.Fprintf(w, "records    %d: %d complete (%.1f%%), %d partial, %d untouched\n", s.Records, s.Complete, pct, s.Partial, untouched)
	fmt.Fprintf(w, "queues     %d queued, %d in flight, %d waiting for a render node\n", s.Queued, s.InFlight, s.WaitingRender)
	restarts := ""
	if s.Restarts > 0 {
		restarts = fmt.Sprintf("  (the whole crawl: %d restart(s))", s.Restarts)
	}
	fmt.Fprintf(w, "pages      %d (%.1f/s over %s)  expired leases %d  late results %d%s\n", s.Pages, s.PagesPerSec,
		(time.Duration(s.ElapsedSeconds * float64(time.Second))).Round(time.Second), s.Expired, s.Late, restarts)
	if s.DNS != nil && s.DNS.Lookups > 0 {
		fmt.Fprintf(w, "dns        %s\n", dnsLine(*s.DNS))
	}
	if line := politenessLine(s.Politeness); line != "" {
		fmt.Fprintf(w, "polite     %s\n", strings.TrimPrefix(line, "politeness: "))
	}
	if len(s.Errors) > 0 {
		fmt.Fprint(w, "errors    ")
		for _, k := range slices.Sorted(maps.Keys(s.Errors)) {
			fmt.Fprintf(w, " %s=%d", k, s.Errors[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nmembers (%d)\n", len(s.Members))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENDPOINT\tRENDER\tIN FLIGHT\tPARKED\tFETCHED\tFAILED\tRATE/s\tRSS\tLAST SEEN")
	for _, m := range s.Members {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d/%d\t%d\t%d\t%d\t%.1f\t%s\t%s ago\n", m.Name, endpointText(m.Endpoint), m.Render,
			m.InFlight, m.Capacity, m.Parked, m.Fetched, m.Failed, m.Rate, mib(m.RSS), s.Updated.Sub(m.LastSeen).Round(100*time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Left) > 0 {
		fmt.Fprintf(w, "\nleft (%d)\n", len(s.Left))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tENDPOINT\tLEFT\tREASON\tFETCHED")
		for _, m := range s.Left {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", m.Name, endpointText(m.Endpoint), m.Left.Local().Format(time.TimeOnly), m.Reason, m.Fetched)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if s.Forged > 0 || len(s.Quarantined) > 0 {
		fmt.Fprintf(w, "\nquarantined members (%d keys; %d forged frames refused): no tasks, frames refused until the dispatcher restarts with the key authorized\n",
			len(s.Quarantined), s.Forged)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tADDRESS\tNAME\tREFUSED\tSINCE\tWHY")
		for _, q := range s.Quarantined {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", q.Key, cmp.Or(q.Address, "?"), cmp.Or(q.Member, "-"), q.Count,
				q.First.Local().Format(time.TimeOnly), q.Why)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Refused) > 0 {
		fmt.Fprintf(w, "\nrefused handshakes (%d peers)\n", len(s.Refused))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tKEY\tATTEMPTS\tLAST\tREASON")
		for _, r := range s.Refused {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", cmp.Or(r.Address, "?"), cmp.Or(r.Key, "-"), r.Count,
				r.Last.Local().Format(time.TimeOnly), r.Reason)
		}
		return tw.Flush()
	}
	return nil
}

func mib(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20))
}

// endpointText is an endpoint as status prints it: the status leaves out
// in-process ones, which mean nothing outside `backfill run`'s process.
func endpointText(e string) string {
	if e == "" {
		return "(in process)"
	}
	return e
}
