// Package memconn is an in-memory net.Conn for benchmarks and tests of
// code that reads requests from and writes answers to a connection
// (internal/h1, internal/proxy, internal/framing), so that allocs/op and
// ns/op count the code under test and no socket.
package memconn

import (
	"bytes"
	"io"
	"net"
	"time"
)

// Conn is an in-memory net.Conn. Read serves Msg N times, in reads of at
// most the caller's buffer, then io.EOF. Write is counted in Written and
// dropped; with Reply set, a write ending a head ("\r\n\r\n") makes the
// next Reads serve Reply once, like an upstream answering each request
// head, and Read returns io.EOF while no Reply is pending. The deadline
// methods and Close do nothing. A Conn is not safe for concurrent use.
type Conn struct {
	// Msg is the byte stream a client sends, served N times.
	Msg []byte
	// Reply, if not nil, is served after every written head instead of Msg.
	Reply []byte
	// N is how many copies of Msg are left to serve.
	N int
	// Peer is RemoteAddr's answer; nil answers an empty *net.TCPAddr.
	Peer net.Addr
	// Written is the number of bytes written so far.
	Written int
	// First is a copy of the first write, kept for checks; nil before it.
	First []byte

	pending []byte // the rest of the copy of Msg or Reply being read
}

// Read copies the next bytes of Msg or Reply into p. It returns io.EOF
// once N copies of Msg are read, or, with Reply set, while no answer is
// pending.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.Reply != nil || c.N == 0 {
			return 0, io.EOF
		}
		c.N--
		c.pending = c.Msg
	}
	k := copy(p, c.pending)
	c.pending = c.pending[k:]
	return k, nil
}

// Drained reports whether every copy of Msg has been read, that is
// whether the next Read returns io.EOF.
func (c *Conn) Drained() bool { return c.N == 0 && len(c.pending) == 0 }

// Write counts p and drops it; see Conn for Reply.
func (c *Conn) Write(p []byte) (int, error) {
	c.Written += len(p)
	if c.First == nil {
		c.First = append([]byte(nil), p...)
	}
	if c.Reply != nil && len(c.pending) == 0 && bytes.HasSuffix(p, []byte("\r\n\r\n")) {
		c.pending = c.Reply
	}
	return len(p), nil
}

// Close does nothing and returns nil.
func (c *Conn) Close() error { return nil }

// LocalAddr returns an empty *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return &net.TCPAddr{} }

// RemoteAddr returns Peer, or an empty *net.TCPAddr if Peer is nil.
func (c *Conn) RemoteAddr() net.Addr {
	if c.Peer == nil {
		return &net.TCPAddr{}
	}
	return c.Peer
}

// SetDeadline does nothing and returns nil.
func (c *Conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline does nothing and returns nil.
func (c *Conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline does nothing and returns nil.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }
