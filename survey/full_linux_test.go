package survey_test

import (
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// listenFullAt opens a listener at ip:port with the smallest accept queue
// and fills it, so a further connect is never answered.
func listenFullAt(ip string, port int) (interface{ Close() error }, error) {
	a := netip.MustParseAddr(ip)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: a.As4()}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "full-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	held := []net.Conn{}
	for range 16 {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, uint16(port)).String(), 100*time.Millisecond)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	return closer(func() error {
		for _, c := range held {
			c.Close()
		}
		return ln.Close()
	}), nil
}

type closer func() error

func (c closer) Close() error { return c() }
