// Command intake measures the dispatcher's intake as a whole process: it
// opens (or resumes) a state directory, loads a records file into it, and
// prints the records per second, the process's peak resident memory and
// the bytes the state directory holds, as one JSON line.
//
//	intake -records 1m.jsonl -state /tmp/st -mappings ../mappings
//
// Run it twice on the same state to measure a resume: the second run
// finds every record known.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"backfill/dispatcher"
	"backfill/etl"
	bundled "backfill/mappings"
	"backfill/store"
)

func main() {
	records := flag.String("records", "", "records file")
	state := flag.String("state", "", "state directory")
	mappings := flag.String("mappings", "", "mappings directory (default: the bundled mappings)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the load here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "intake:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*records, *state, *mappings); err != nil {
		fmt.Fprintln(os.Stderr, "intake:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(records, state, mappings string) error {
	ctx := context.Background()
	var set *etl.Set
	var err error
	if mappings != "" {
		set, err = etl.LoadDir(mappings)
	} else {
		set, err = etl.LoadFS(bundled.FS, ".")
	}
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := store.Open(ctx, filepath.Join(state, "results.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := dispatcher.New(dispatcher.Config{StateDir: state, Listen: "tcp://127.0.0.1:*", Mappings: set, Store: st, Depth: 1})
	if err != nil {
		return err
	}
	opened := time.Since(start)
	rep, err := d.Load(ctx, records)
	if err != nil {
		d.Close()
		return err
	}
	loaded := time.Since(start)
	if err := d.Close(); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	sizes := map[string]int64{}
	var total int64
	filepath.WalkDir(state, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				sizes[e.Name()] = fi.Size()
				total += fi.Size()
			}
		}
		return nil
	})
	out := map[string]any{
		"records":       rep.Records,
		"new":           rep.New,
		"bad":           rep.Bad,
		"open_s":        opened.Seconds(),
		"load_s":        (loaded - opened).Seconds(),
		"records_per_s": float64(rep.Records) / (loaded - opened).Seconds(),
		"peak_rss_mib":  float64(ru.Maxrss) / 1024,
		"user_s":        time.Duration(ru.Utime.Nano()).Seconds(),
		"sys_s":         time.Duration(ru.Stime.Nano()).Seconds(),
		"state_bytes":   total,
		"files":         sizes,
		"bytes_per_rec": float64(total) / float64(max(rep.Records, 1)),
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
