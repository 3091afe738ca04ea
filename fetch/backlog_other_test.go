//go:build !linux

package fetch

import (
	"errors"
	"net"
)

func listenBacklog() (net.Listener, error) {
	return nil, errors.New("no small-backlog listener on this platform")
}
