//go:build !unix

package h1

import "net"

// IdleProbe is empty where a socket cannot be read without blocking: an
// idle connection always reports quiet, and a stray response is found by
// the next exchange.
type IdleProbe struct{}

// Init does nothing here.
func (p *IdleProbe) Init(net.Conn) {}

// Quiet reports true: nothing can be learned without a read.
func (p *IdleProbe) Quiet() bool { return true }

// Exchange does nothing here: the caller writes head and reads as usual.
func (p *IdleProbe) Exchange(head, into []byte, probe bool, done func() bool) (n, sent int, stale bool, err error) {
	return 0, 0, false, nil
}

// Exchanges reports false: Exchange leaves the work to the caller here.
func (p *IdleProbe) Exchanges() bool { return false }

// Gone reports false: nothing can be learned without a read.
func (p *IdleProbe) Gone() bool { return false }
