package fetch

import (
	"net"
	"os"
	"syscall"
)

// listenBacklog opens a loopback TCP listener with the smallest accept
// queue the kernel allows, for the connect-timeout test.
func listenBacklog() (net.Listener, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "backlog-listener")
	defer f.Close()
	return net.FileListener(f)
}
