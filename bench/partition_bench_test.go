//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// cutUID is the user the cut-off supervisor runs as, so that the packet
// filter can tell its packets from the other processes' (nobody).
const cutUID = 65534

// healWindow is how long after the heal a request under the delay is
// counted as the heal's.
const healWindow = 10 * time.Second

// BenchmarkPartition is issue 30's partition: a cluster of separate
// processes (`backfill dispatcher` and two `backfill supervisor`s, as
// BenchmarkPoliteness runs them) crawls the large web of PARTITION_HOSTS
// (40) hosts × PARTITION_PAGES (60) profiles whose robots.txt sets
// Crawl-delay PARTITION_DELAY (3 s). PARTITION_AFTER (20 s) after the
// supervisors start, sup-2 is cut off from the dispatcher for
// PARTITION_CUT (60 s) while it can still reach the web: nftables drops,
// both ways, every packet between it and the dispatcher (sup-2 runs as
// user nobody, and the rules drop that user's packets to the dispatcher's
// intake port and every packet to or from sup-2's task socket's port).
// Then the cut heals and the crawl runs to its end. PARTITION_WAY=out
// cuts one way only: sup-2's packets to the dispatcher (its heartbeats,
// results, and its acknowledgements of what the dispatcher sends) are
// dropped, the dispatcher's to it still arrive, as a filter by user alone
// does.
//
// Each build runs twice: the supervisors sharing one cache store (--store
// a SQLite file of both) and each with its own. The base
// (POLITE_BASE_BIN, when set) runs first, then the branch, in the same
// run. From the web's own request log: the URLs requested twice and the
// intervals from the end of a host's response to its next request under
// the Crawl-delay, during the cut, within 10 s of the heal and elsewhere,
// with who made them; and what each supervisor and the dispatcher logged
// at WARN and above.
//
// It changes the machine's packet filter (a table of its own, removed at
// the end), so it needs root, and nft.
//
//	cd bench && POLITE_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench Partition -benchtime 1x -timeout 60m .
func BenchmarkPartition(b *testing.B) {
	if os.Geteuid() != 0 {
		proctest.NotRoot(b, "the partition benchmark drops a supervisor's packets with nftables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		b.Fatalf("the partition benchmark drops packets with nft: %v", err)
	}
	hosts := envInt(b, "PARTITION_HOSTS", 40)
	pages := envInt(b, "PARTITION_PAGES", 60)
	delay := envDuration(b, "PARTITION_DELAY", 3*time.Second)
	after := envDuration(b, "PARTITION_AFTER", 20*time.Second)
	cut := envDuration(b, "PARTITION_CUT", 60*time.Second)
	way := envString("PARTITION_WAY", "both")
	if way != "both" && way != "out" {
		b.Fatalf("PARTITION_WAY=%q: both or out", way)
	}

	cb := newClusterBench(b, testweb.LargeOptions{Hosts: hosts, Pages: pages, CrawlDelay: delay})
	// The cut-off supervisor runs as nobody: it must reach the binaries,
	// mappings and its own state directory.
	for d := cb.dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var builds []build
	if base := os.Getenv("POLITE_BASE_BIN"); base != "" {
		builds = append(builds, build{"base", base})
	}
	builds = append(builds, build{"branch", cb.bin})
	fmt.Printf("partition: %d hosts × (%d profiles + index), Crawl-delay %s; dispatcher + 2 supervisors of 8 workers, default flags; sup-2 cut off from the dispatcher (PARTITION_WAY=%s) %s after the start for %s\n",
		hosts, pages, delay, way, after, cut)

	type result struct {
		c                       politeCounts
		during, healed, outside int // intervals under the delay, by when the request came
		againDuring, againAfter int // page requests again during the cut, and after it
	}
	results := map[string]result{}
	var names []string
	for _, bd := range builds {
		for _, shared := range []bool{true, false} {
			name := bd.name + "/own-stores"
			if shared {
				name = bd.name + "/shared-store"
			}
			names = append(names, name)
			b.Run(name, func(b *testing.B) {
				var res result
				for i := 0; i < b.N; i++ {
					taskPort := freePort(b)
					var cutAt, healAt time.Time
					table := fmt.Sprintf("backfill_bench_partition_%d", os.Getpid())
					b.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", table).Run() })
					run := clusterRun{supervisors: 2, workers: 8, bin: bd.bin, hostsMove: true}
					var store string
					run.prepare = func(i int, state string, cmd *exec.Cmd) {
						if shared {
							if store == "" {
								store = sharedStore(b, filepath.Dir(state))
							}
							cmd.Args = append(cmd.Args, "--store", store)
						}
						if i != 2 {
							return
						}
						cmd.Args = append(cmd.Args, "--listen", fmt.Sprintf("tcp://127.0.0.1:%d", taskPort))
						if err := os.MkdirAll(state, 0o755); err != nil {
							b.Fatal(err)
						}
						if err := os.Chown(state, cutUID, cutUID); err != nil {
							b.Fatal(err)
						}
						cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: cutUID, Gid: cutUID}}
					}
					run.during = func(ctx context.Context, endpoint string) {
						_, intake, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "tcp://"))
						if err != nil {
							b.Errorf("dispatcher endpoint %q: %v", endpoint, err)
							return
						}
						select {
						case <-ctx.Done():
							return
						case <-time.After(after):
						}
						// Both ways: sup-2's packets to the intake, and every
						// packet to or from its task socket. One way: what
						// sup-2 sends on either.
						drops := fmt.Sprintf("meta skuid %d tcp dport %s drop\n\t\ttcp dport %d drop\n\t\ttcp sport %d drop", cutUID, intake, taskPort, taskPort)
						if way == "out" {
							drops = fmt.Sprintf("meta skuid %d tcp dport %s drop\n\t\tmeta skuid %d tcp sport %d drop", cutUID, intake, cutUID, taskPort)
						}
						rules := fmt.Sprintf("table inet %s {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n\t\t%s\n\t}\n}\n", table, drops)
						nft := exec.Command("nft", "-f", "-")
						nft.Stdin = strings.NewReader(rules)
						if out, err := nft.CombinedOutput(); err != nil {
							b.Errorf("nft: %v\n%s", err, out)
							return
						}
						cutAt = time.Now()
						select {
						case <-ctx.Done():
						case <-time.After(cut):
						}
						if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
							b.Errorf("nft delete: %v\n%s", err, out)
						}
						healAt = time.Now()
					}
					o := cb.run(b, strings.ReplaceAll(name, "/", "-"), run)
					if cutAt.IsZero() || healAt.Sub(cutAt) < cut {
						b.Fatalf("the crawl ended %s after the start, before the cut (at %s) had lasted %s: make the web larger",
							o.wall.Round(time.Millisecond), after, cut)
					}
					p := testweb.CheckPoliteness(o.log, sameDelay(delay))
					res = result{c: countPoliteness(p, o.start)}
					for _, iv := range p.Under {
						switch t := iv.Next.Time; {
						case !t.Before(cutAt) && t.Before(healAt):
							res.during++
						case !t.Before(healAt) && t.Before(healAt.Add(healWindow)):
							res.healed++
						default:
							res.outside++
						}
					}
					for _, r := range res.c.p.Repeats {
						if r.Again.Path == "/robots.txt" {
							continue
						}
						if t := r.Again.Time; !t.Before(cutAt) && t.Before(healAt) {
							res.againDuring++
						} else if !t.Before(healAt) {
							res.againAfter++
						}
					}
					fmt.Printf("partition: %-20s %d pages in %s; cut at +%s, healed at +%s; hosts requested by both supervisors %d; pages by supervisor %s\n",
						name, o.pages, o.wall.Round(time.Millisecond), since(o.start, cutAt), since(o.start, healAt), o.shared, spread(o.pagesBySup))
					fmt.Printf("partition: %-20s intervals under the delay: %d during the cut, %d within %s of the heal, %d elsewhere; pages requested again: %d during the cut, %d after it\n",
						name, res.during, res.healed, healWindow, res.outside, res.againDuring, res.againAfter)
					for i, l := range o.supLogs {
						printWarnings(fmt.Sprintf("partition: %-20s sup-%d", name, i+1), l, cutAt)
					}
					printWarnings(fmt.Sprintf("partition: %-20s dispatcher", name), o.dispLog, cutAt)
				}
				res.c.report(b, "partition", name)
				results[name] = res
			})
		}
	}
	for _, name := range names {
		if r, ok := results[name]; ok {
			fmt.Printf("partition: %-20s %6d requests; intervals under the delay: %3d during the cut, %3d within %s of the heal, %3d elsewhere (shortest %s); pages requested again %3d (%d during the cut), robots.txt again %d\n",
				name, r.c.requests, r.during, r.healed, healWindow, r.outside, r.c.shortest.Round(time.Millisecond), r.c.pagesAgain, r.againDuring, r.c.robotsAgain)
		}
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// sharedStore makes, in dir, the SQLite file both supervisors are given
// as --store: empty, in a directory of its own, both owned by the user
// the cut-off supervisor runs as (SQLite run by root gives its journal
// files the database's owner, so both can write).
func sharedStore(b *testing.B, dir string) string {
	d := filepath.Join(dir, "shared")
	if err := os.MkdirAll(d, 0o755); err != nil {
		b.Fatal(err)
	}
	p := writeFile(b, d, "cache.db", nil)
	for _, f := range []string{d, p} {
		if err := os.Chown(f, cutUID, cutUID); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// printWarnings prints what a process logged (JSON lines) at WARN and
// above, one line per message with how often and when (from at, the
// cut), so that what a cut-off member says can be read beside the
// requests.
func printWarnings(prefix string, log []byte, at time.Time) {
	type seen struct {
		n           int
		first, last time.Time
		example     string
	}
	byMsg := map[string]*seen{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		level, _ := rec["level"].(string)
		if level != "WARN" && level != "ERROR" {
			continue
		}
		msg, _ := rec["msg"].(string)
		t, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"]))
		key := level + " " + msg
		s, ok := byMsg[key]
		if !ok {
			s = &seen{first: t}
			byMsg[key] = s
			order = append(order, key)
			delete(rec, "time")
			delete(rec, "level")
			delete(rec, "msg")
			ex, _ := json.Marshal(rec)
			s.example = string(ex)
		}
		s.n++
		s.last = t
	}
	if len(order) == 0 {
		fmt.Printf("%s: nothing at WARN or above\n", prefix)
	}
	slices.SortStableFunc(order, func(x, y string) int { return byMsg[x].first.Compare(byMsg[y].first) })
	for _, k := range order {
		s := byMsg[k]
		fmt.Printf("%s: %s ×%d, first at %s from the cut, last at %s; %s\n", prefix, k, s.n,
			s.first.Sub(at).Round(time.Millisecond), s.last.Sub(at).Round(time.Millisecond), tailString(s.example, 300))
	}
}

// tailString cuts s to at most n bytes, marking the cut.
func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
