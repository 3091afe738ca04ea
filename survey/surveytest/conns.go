package surveytest

import (
	"crypto/tls"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"unsafe"
)

// Conns counts the connections servers have open at once, per address
// and per /24, as the kernel sees them rather than as the servers'
// goroutines do: a connection whose client has closed its end no longer
// counts, whether or not its server has noticed yet. A prober closes a
// connection before it opens the next, so on a loaded machine, where a
// server's goroutine may learn of the close long after the next
// connection arrived, the count is still exact. Safe for concurrent use.
type Conns struct {
	mu       sync.Mutex
	open     map[netip.Addr][]net.Conn
	maxAddr  map[netip.Addr]int
	maxBlock map[netip.Prefix]int
}

// Opened counts c, a connection a server at a accepted.
func (k *Conns) Opened(a netip.Addr, c net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open == nil {
		k.open, k.maxAddr, k.maxBlock = map[netip.Addr][]net.Conn{}, map[netip.Addr]int{}, map[netip.Prefix]int{}
	}
	blk, _ := a.Prefix(24)
	inBlock := 0
	for b, cs := range k.open {
		cs = slices.DeleteFunc(cs, clientClosed)
		k.open[b] = cs
		if p, _ := b.Prefix(24); p == blk {
			inBlock += len(cs)
		}
	}
	k.open[a] = append(k.open[a], c)
	k.maxAddr[a] = max(k.maxAddr[a], len(k.open[a]))
	k.maxBlock[blk] = max(k.maxBlock[blk], inBlock+1)
}

// Closed forgets c.
func (k *Conns) Closed(a netip.Addr, c net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.open[a] = slices.DeleteFunc(k.open[a], func(x net.Conn) bool { return x == c })
}

// Max is the most connections a had open at once.
func (k *Conns) Max(a netip.Addr) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxAddr[a]
}

// MaxBlock is the most connections the addresses of a's /24 had open at
// once.
func (k *Conns) MaxBlock(a netip.Addr) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	blk, _ := a.Prefix(24)
	return k.maxBlock[blk]
}

// TCP states (include/net/tcp_states.h) in which the peer has closed its
// end: a FIN or a reset came in.
const (
	tcpTimeWait  = 6
	tcpClose     = 7
	tcpCloseWait = 8
	tcpLastAck   = 9
	tcpClosing   = 11
)

// clientClosed reports whether the client of a server's connection has
// closed its end, or the server its socket.
func clientClosed(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	state := -1
	if err := rc.Control(func(fd uintptr) { state = tcpState(fd) }); err != nil {
		return true // the server closed it
	}
	switch state {
	case tcpTimeWait, tcpClose, tcpCloseWait, tcpLastAck, tcpClosing:
		return true
	}
	return false
}

// tcpState is the kernel's state of a TCP socket (TCP_INFO's first
// field), -1 when it cannot be read.
func tcpState(fd uintptr) int {
	var info syscall.TCPInfo
	size := uint32(unsafe.Sizeof(info))
	_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
		uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return -1
	}
	return int(info.State)
}
