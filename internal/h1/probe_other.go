//go:build !unix

package h1

// idleProbe is empty where silent cannot look at the socket.
type idleProbe struct{}

func (u *UpstreamConn) initProbe() {}

// silent reports whether u holds no bytes past its last response.
func (u *UpstreamConn) silent() bool { return len(u.rd.buffered()) == 0 }
