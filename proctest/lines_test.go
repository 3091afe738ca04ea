package proctest

import (
	"io"
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
