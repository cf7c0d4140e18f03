//go:build !unix

package proxy

// idleProbe is empty where silent cannot look at the socket.
type idleProbe struct{}

func (pc *directConn) initSilent() {}

// silent reports whether pc holds no bytes past its last response. Without
// a non-blocking socket read here, a stray response that arrives while the
// connection is idle is found only by the next exchange.
func (pc *directConn) silent() bool { return pc.br.Buffered() == 0 }
