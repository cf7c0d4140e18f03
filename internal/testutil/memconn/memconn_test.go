package memconn

import (
	"io"
	"net"
	"testing"
)

// TestReadServesMsgNTimes: a 3-byte Msg served twice through 2-byte reads
// comes out as "ab", "c", "ab", "c", then io.EOF, and Drained turns true
// only after the last byte.
func TestReadServesMsgNTimes(t *testing.T) {
	c := &Conn{Msg: []byte("abc"), N: 2}
	buf := make([]byte, 2)
	for i, want := range []string{"ab", "c", "ab", "c"} {
		if c.Drained() {
			t.Fatalf("read %d: drained early", i)
		}
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %d = %q, %v; want %q, nil", i, buf[:n], err, want)
		}
	}
	if !c.Drained() {
		t.Fatal("not drained after 2 copies")
	}
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after 2 copies = %d, %v; want 0, EOF", n, err)
	}
}

// TestWriteTriggersReply: with Reply set, Read is io.EOF until a head is
// written; a write ending "\r\n\r\n" makes Reply readable once; Written
// counts every byte and First keeps the first write.
func TestWriteTriggersReply(t *testing.T) {
	c := &Conn{Reply: []byte("OK")}
	buf := make([]byte, 8)
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read before a head = %d, %v; want 0, EOF", n, err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\n"))
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after a partial head = %d, %v; want 0, EOF", n, err)
	}
	c.Write([]byte("Host: h\r\n\r\n"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "OK" {
		t.Fatalf("read after the head = %q, %v; want \"OK\", nil", buf[:n], err)
	}
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("second read = %d, %v; want 0, EOF", n, err)
	}
	if c.Written != 27 || string(c.First) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("Written %d, First %q; want 18, the request line", c.Written, c.First)
	}
}

// TestRemoteAddr: RemoteAddr answers Peer, or an empty TCP address.
func TestRemoteAddr(t *testing.T) {
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 7), Port: 40000}
	if got := (&Conn{Peer: peer}).RemoteAddr(); got != peer {
		t.Fatalf("RemoteAddr = %v; want %v", got, peer)
	}
	if got := (&Conn{}).RemoteAddr().String(); got != ":0" {
		t.Fatalf("RemoteAddr without Peer = %q; want \":0\"", got)
	}
}
