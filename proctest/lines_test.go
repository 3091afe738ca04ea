package proctest

import (
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWait: a line already written is found at once, one written later
// wakes the waiter, and one that never comes gives up at the deadline.
func TestWait(t *testing.T) {
	var l Lines
	l.Add("starting")
	if s, ok := l.Wait(regexp.MustCompile(`^start`), time.Now()); !ok || s != "starting" {
		t.Errorf("Wait for a line already there = %q, %v", s, ok)
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.Scan(pr)
	}()
	got := make(chan string)
	go func() {
		s, _ := l.Wait(regexp.MustCompile(`listening on (\S+)`), time.Now().Add(time.Minute))
		got <- s
	}()
	io.WriteString(pw, "loading\nlistening on 127.0.0.1:5550\nmore\n")
	if s := <-got; s != "listening on 127.0.0.1:5550" {
		t.Errorf("Wait for a later line = %q", s)
	}
	// A line longer than Scan keeps ends the lines; the writer is not
	// blocked by it.
	io.WriteString(pw, strings.Repeat("x", maxLine+1)+"\nafter\n")
	pw.Close()
	wg.Wait()
	if _, ok := l.Wait(regexp.MustCompile(`^never$`), time.Now().Add(10*time.Millisecond)); ok {
		t.Error("Wait found a line never written")
	}
	if want := "starting\nloading\nlistening on 127.0.0.1:5550\nmore"; l.String() != want {
		t.Errorf("String() = %q, want %q", l.String(), want)
	}
}

// TestWaitN: the nth matching line, counted from the first line written;
// fewer than n give up at the deadline.
func TestWaitN(t *testing.T) {
	var l Lines
	for _, s := range []string{"left a", "joined", "left b", "left c"} {
		l.Add(s)
	}
	left := regexp.MustCompile(`^left`)
	for _, tc := range []struct {
		n    int
		want string
		ok   bool
	}{
		{1, "left a", true},
		{2, "left b", true},
		{3, "left c", true},
		{4, "", false},
	} {
		if s, ok := l.WaitN(left, tc.n, time.Now().Add(10*time.Millisecond)); s != tc.want || ok != tc.ok {
			t.Errorf("WaitN(%d) = %q, %v; want %q, %v", tc.n, s, ok, tc.want, tc.ok)
		}
	}
}

// TestProcess: a started process's stderr lines and exit code reach the
// test; one still running at the deadline is reported, and the test's end
// kills it.
func TestProcess(t *testing.T) {
	p := Start(t, exec.Command("sh", "-c", "echo starting >&2; echo done >&2; exit 3"))
	if _, ok := p.Stderr.Wait(regexp.MustCompile(`^done$`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("stderr: %q", p.Stderr.String())
	}
	if code, err := p.Wait(time.Minute); code != 3 || err != nil {
		t.Errorf("Wait = %d, %v; want 3", code, err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done is open after the process ended")
	}
	var slow *Process
	t.Run("still running", func(t *testing.T) {
		slow = Start(t, exec.Command("sleep", "60"))
		if code, err := slow.Wait(10 * time.Millisecond); err == nil {
			t.Errorf("Wait on a sleeping process = %d, nil; want an error", code)
		}
	})
	select {
	case <-slow.Done():
	default:
		t.Error("the process outlived its test")
	}
}
