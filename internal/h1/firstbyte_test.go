package h1

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestFirstHeadDue: a new connection that sends nothing is closed after
// ReadHeaderTimeout, as net/http closes it, not kept for IdleTimeout.
func TestFirstHeadDue(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startServing(t, ln, &Server{Handler: handOverAll, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: time.Hour})
	_, br := dialProxy(t, ln.Addr().String()) // its deadline: 10 s
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("a silent new connection: %v, want the server's close (EOF) well before the client's 10 s", err)
	}
}
