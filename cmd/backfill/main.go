// Command backfill fills the missing fields of a dataset's records by
// crawling the web politely from the links the records carry.
//
// This file only parses the subcommand and maps errors to exit codes; each
// subcommand lives in its own file and wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK          = 0
	exitFail        = 1   // the run could not go on
	exitUsage       = 2   // bad flags or arguments
	exitInterrupted = 130 // stopped by SIGINT or SIGTERM before the work was done (128 + SIGINT, as shells report it)
)

// interruptedMsg is what a command stopped by a signal before its work was
// done says: the crawl's state is on disk, and the same command resumes.
const interruptedMsg = "interrupted; rerun the same command to resume"

// errUsage marks errors that are the caller's flags or arguments.
var errUsage = errors.New("usage")

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// stoppable commands end normally on a signal (a supervisor is a
	// service; status --watch runs until stopped); the others are
	// interrupted by one.
	stoppable bool
}

var commands = []command{
	{"run", "crawl for a records file on this machine (dispatcher and supervisors in one process)", cmdRun, false},
	{"dispatcher", "run the dispatcher of a cluster", cmdDispatcher, false},
	{"supervisor", "run a supervisor of a cluster", cmdSupervisor, true},
	{"status", "show a dispatcher's members, rates, queues and records complete", cmdStatus, true},
	{"keygen", "write CURVE key pairs (NAME.key, NAME.pub) that secure a cluster", cmdKeygen, false},
	{"export", "write the records with the values found", cmdExport, false},
	{"report", "write a crawl's run report: one self-contained HTML file with charts", cmdReport, false},
	{"purge", "take back every answer one supervisor gave a crawl: its pages are fetched again, its values leave the records", cmdPurge, false},
	{"survey", "survey hosts: web (web-server metadata of domains) or ports (TCP liveness)", cmdSurvey, false},
	{"mappings", "author site mappings: check [DIR], try [--mapping NAME] URL|FILE, test [--update] [DIR], learn -o DIR", cmdMappings, false},
	{"demo", "crawl the built-in fixture web and show the records before and after", cmdDemo, false},
	{"provision", "deploy a cluster to droplets: init FILE, render FILE -o DIR, check DIR", cmdProvision, false},
	{"about", "write the page telling site operators what the crawler does and who runs it (host it at --contact)", cmdAbout, false},
}

func main() {
	// A crawl keeps little live data (bounded queues, one page per worker)
	// but allocates fast (every page is parsed into a tree), so the
	// collector's default pace costs a fifth of the CPU for nothing. A
	// GOGC set by the user wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

// gcPercent is backfill's default GOGC; see main.
const gcPercent = 200

// memoryLimits are the soft limits of the Go heap (runtime/debug
// SetMemoryLimit) of the commands that crawl, unless GOMEMLIMIT is set.
// GOGC 200 lets the heap grow to three times what is live, and at a few
// thousand pages a second a supervisor's live data (a body per worker, the
// pages being parsed) swings enough that its resident memory climbed past
// 150 MiB though little of it was live; near its limit the collector runs
// sooner and gives freed memory back. The limits leave room for what the
// Go heap does not hold: the binary's own pages (about 35 MiB resident)
// and SQLite's page caches (the dispatcher's state keeps 8 MiB, which
// costs about 16). run's limit holds a crawl of 10,000 hosts under 256
// MB in all. See docs/scale.md for the figures they hold a process to.
var memoryLimits = map[string]int64{
	"dispatcher": 128 << 20,
	"supervisor": 96 << 20,
	"run":        160 << 20,
}

func mainExit(args []string, stdout, stderr io.Writer) int {
	defer profile(stderr)()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if limit, ok := memoryLimits[c.name]; ok && os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(limit)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case ctx.Err() != nil && !c.stoppable && !errors.Is(err, errUsage) && !errors.Is(err, flag.ErrHelp):
			// Whatever the command was doing was cut short by the
			// signal: that is the news, not the cancellation errors.
			fmt.Fprintln(stderr, interruptedMsg)
			return exitInterrupted
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "backfill %s: %v\n", c.name, err)
			return exitUsage
		default:
			fmt.Fprintf(stderr, "backfill %s: %v\n", c.name, err)
			return exitFail
		}
	}
	fmt.Fprintf(stderr, "backfill: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

// profile starts the profiles asked for in the environment and returns
// what stops them: BACKFILL_CPUPROFILE=path writes a CPU profile,
// BACKFILL_BLOCKPROFILE=path a blocking profile (every blocking event),
// BACKFILL_MEMPROFILE=path an allocation profile, BACKFILL_TRACE=path an
// execution trace. A profile that cannot be written is reported and
// skipped.
func profile(stderr io.Writer) (stop func()) {
	var stops []func()
	// "%p" in a path is the process id: a cluster's processes started
	// with one environment write one profile each.
	getenv := func(name string) string {
		return strings.ReplaceAll(os.Getenv(name), "%p", strconv.Itoa(os.Getpid()))
	}
	if path := getenv("BACKFILL_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "backfill: cpu profile %s: %v\n", path, err)
		} else {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if path := getenv("BACKFILL_BLOCKPROFILE"); path != "" {
		runtime.SetBlockProfileRate(1)
		stops = append(stops, func() {
			f, err := os.Create(path)
			if err == nil {
				err = errors.Join(pprof.Lookup("block").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(stderr, "backfill: block profile %s: %v\n", path, err)
			}
		})
	}
	if path := getenv("BACKFILL_MEMPROFILE"); path != "" {
		stops = append(stops, func() {
			f, err := os.Create(path)
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(stderr, "backfill: allocation profile %s: %v\n", path, err)
			}
		})
	}
	if path := getenv("BACKFILL_TRACE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "backfill: trace %s: %v\n", path, err)
		} else {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		}
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: backfill <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n'backfill <command> -h' lists a command's flags.")
}
