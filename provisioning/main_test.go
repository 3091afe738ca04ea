package provisioning_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// childEnv names the part a re-executed test binary plays inside one of
// the rehearsal's network namespaces: "web", "dial" or "forger".
const childEnv = "BACKFILL_REHEARSAL_CHILD"

// TestMain lets the rehearsal run servers and probes inside its network
// namespaces: a socket belongs to the namespace of the process that made
// it, so those are this binary again, started with `ip netns exec`.
func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

// child plays role until SIGTERM (servers) or at once (dial). A server
// says "ready" on standard error once it serves, and writes what it saw
// to standard output when it stops; a probe writes its outcome there.
func child(role string) int {
	addr := os.Getenv("BACKFILL_REHEARSAL_ADDR")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	switch role {
	case "dial":
		timeout, _ := time.ParseDuration(os.Getenv("BACKFILL_REHEARSAL_TIMEOUT"))
		c, err := net.DialTimeout("tcp", addr, timeout)
		var ne net.Error
		switch {
		case err == nil:
			c.Close()
			fmt.Println("connected")
		case errors.As(err, &ne) && ne.Timeout():
			fmt.Println("timeout")
		case errors.Is(err, syscall.ECONNREFUSED):
			fmt.Println("refused")
		default:
			fmt.Println("error:", err)
		}
		return 0
	case "web":
		web, err := testweb.Start(testweb.Options{CrawlDelay: testweb.DefaultCrawlDelay, Addr: addr})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "ready")
		<-stop
		web.Close()
		if err := json.NewEncoder(os.Stdout).Encode(web.Log()); err != nil {
			return 1
		}
		return 0
	}
	if role == "forger" {
		return forge(addr, stop)
	}
	fmt.Fprintf(os.Stderr, "%s=%q: no such part\n", childEnv, role)
	return 2
}
