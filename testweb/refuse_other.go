//go:build !unix

package testweb

import (
	"fmt"
	"net"
)

// refuser holds a loopback port that refuses connections: one a listener
// had and gave back. (Unix systems keep the port bound; see
// refuse_unix.go.)
type refuser struct{ addr string }

func newRefuser() (*refuser, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testweb: refusing port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &refuser{addr: addr}, nil
}

func (r *refuser) close() error { return nil }
