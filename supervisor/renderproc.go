package supervisor

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The browser's process tree, read from /proc.

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid int
	state     byte
}

// readProcs lists the processes of the machine (Linux; empty elsewhere).
func readProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold anything; the
		// fields after the last ')' are fixed.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procInfo{pid: pid, ppid: ppid, state: f[0][0]})
	}
	return out
}

// treeMemory sums the resident and proportional set sizes of pid and all
// its descendants.
func treeMemory(pid int) (rss, pss uint64) {
	children := make(map[int][]int)
	for _, p := range readProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	page := uint64(os.Getpagesize())
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		dir := "/proc/" + strconv.Itoa(p)
		if b, err := os.ReadFile(dir + "/statm"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 1 {
				if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
					rss += n * page
				}
			}
		}
		if b, err := os.ReadFile(dir + "/smaps_rollup"); err == nil {
			for line := range strings.Lines(string(b)) {
				if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
					if f := strings.Fields(rest); len(f) > 0 {
						if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
							pss += kb << 10
						}
					}
					break
				}
			}
		}
		queue = append(queue, children[p]...)
	}
	return rss, pss
}

// profileProcs lists the processes started with --user-data-dir=dir:
// Chromium passes it to every child, so it finds the tree even after the
// main process died and its children were reparented.
func profileProcs(dir string) []int {
	var pids []int
	for _, p := range profileCmdlines(dir) {
		pids = append(pids, p.pid)
	}
	return pids
}

// procCmdline is a process and its arguments.
type procCmdline struct {
	pid, ppid int
	args      []string
}

// profileCmdlines lists the processes of profile dir with their
// arguments. The browser's children rewrite their command line into one
// string, spaces between the arguments.
func profileCmdlines(dir string) []procCmdline {
	want := "--user-data-dir=" + dir
	var out []procCmdline
	self := os.Getpid()
	for _, p := range readProcs() {
		if p.pid == self || p.state == 'Z' {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 1 {
			args = strings.Fields(args[0])
		}
		for _, a := range args {
			if a == want {
				out = append(out, procCmdline{pid: p.pid, ppid: p.ppid, args: args})
				break
			}
		}
	}
	return out
}

// browserMain returns the browser's main process, given the process pid
// that was started (the browser, or a script that runs it): the process of
// profile dir with no --type (the browser's children have one) and no
// child of that kind. It returns pid when there is none such.
func browserMain(pid int, dir string) int {
	// The script carries the browser's arguments too: the browser is the
	// one whose parent is another of them.
	var mains []procCmdline
	for _, p := range profileCmdlines(dir) {
		if !slices.ContainsFunc(p.args, func(a string) bool { return strings.HasPrefix(a, "--type=") }) {
			mains = append(mains, p)
		}
	}
	for _, p := range mains {
		if !slices.ContainsFunc(mains, func(c procCmdline) bool { return c.ppid == p.pid }) {
			return p.pid
		}
	}
	return pid
}

// killLeftovers kills the processes of profile dir until none is seen for a
// few passes in a row (a child can fork as its parent dies), for at most
// limit. It returns how many it killed.
func killLeftovers(dir string, limit time.Duration) int {
	const quietPasses = 3
	deadline := time.Now().Add(limit)
	killed := 0
	for quiet := 0; quiet < quietPasses && time.Now().Before(deadline); {
		pids := profileProcs(dir)
		if len(pids) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(10 * time.Millisecond) // a pass over /proc, not synchronisation
	}
	return killed
}
