//go:build unix

package testweb

import (
	"fmt"
	"net"
	"syscall"
)

// refuser holds a loopback port that refuses every connection: a TCP
// socket bound to it and never listening. Holding the port keeps any
// other socket from taking it, so the refusal cannot turn into someone
// else's answer while the Web runs.
type refuser struct {
	fd   int
	addr string
}

func newRefuser() (*refuser, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("testweb: refusing socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("testweb: bind refusing socket: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("testweb: refusing socket: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return nil, fmt.Errorf("testweb: refusing socket bound to %T", sa)
	}
	return &refuser{fd: fd, addr: (&net.TCPAddr{IP: net.IP(in4.Addr[:]), Port: in4.Port}).String()}, nil
}

func (r *refuser) close() error { return syscall.Close(r.fd) }
