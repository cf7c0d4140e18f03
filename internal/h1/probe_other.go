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
