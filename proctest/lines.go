// Package proctest runs the processes of a test: Start starts a command,
// keeps what it writes to standard error a line at a time (Lines), so
// that the test waits for the line saying the process got somewhere
// ("dispatcher listening") rather than sleeping, and kills it at the
// test's end if it is still running. The end-to-end tests of cmd/backfill
// and the provisioning rehearsal run their processes with it.
//
//	p := proctest.Start(t, exec.Command(bin, "dispatcher", …))
//	if _, ok := p.Stderr.Wait(regexp.MustCompile(`listening`), time.Now().Add(time.Minute)); !ok { … }
//	code, err := p.Wait(time.Minute)
package proctest

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// maxLine is the longest line kept whole; a longer one ends what Scan
// keeps, and the rest is read and dropped.
const maxLine = 1 << 20

// Lines are the lines a process wrote. The zero value is empty and ready;
// its methods are safe for concurrent use.
type Lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{} // closed, and replaced, at each new line
}

// Add appends a line and wakes the waiters.
func (l *Lines) Add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
	if l.more != nil {
		close(l.more)
		l.more = nil
	}
}

// Scan adds each line of r until it ends, then reads the rest of r, so
// that the process writing it never blocks on a full pipe.
func (l *Lines) Scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		l.Add(sc.Text())
	}
	io.Copy(io.Discard, r)
}

// String is every line so far, joined by newlines.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// Wait returns the first line matching re, waiting for it until
// deadline; false when none came by then.
func (l *Lines) Wait(re *regexp.Regexp, deadline time.Time) (string, bool) {
	return l.WaitN(re, 1, deadline)
}

// WaitN returns the nth line matching re (counting from 1), waiting for
// it until deadline; false when fewer came by then. A test that waits
// for an event the process may have logged before waits for one more
// than it has seen.
func (l *Lines) WaitN(re *regexp.Regexp, n int, deadline time.Time) (string, bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for i, seen := 0, 0; ; {
		l.mu.Lock()
		for ; i < len(l.all); i++ {
			if re.MatchString(l.all[i]) {
				if seen++; seen == n {
					s := l.all[i]
					l.mu.Unlock()
					return s, true
				}
			}
		}
		if l.more == nil {
			l.more = make(chan struct{})
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-timer.C:
			return "", false
		}
	}
}
