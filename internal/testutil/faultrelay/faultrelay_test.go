package faultrelay

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/waitfor"
)

// dial connects to addr or fails the test.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dialling %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send writes a RESP PING.
func send(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatalf("writing PING: %v", err)
	}
}

// pong reads "+PONG\r\n" within d and returns the read error, if any.
func pong(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return errors.New("got " + string(buf))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestRelayModes walks Pass → Blackhole → Pass → Reset → Pass against a
// real redis-server with raw RESP PINGs on old and new connections, and
// checks that the relay's goroutines all end at Close.
func TestRelayModes(t *testing.T) {
	srv := redisserver.Start(t)
	base := runtime.NumGoroutine()
	r := Start(t, srv.Addr)

	c1 := dial(t, r.Addr())
	send(t, c1)
	if err := pong(c1, time.Second); err != nil {
		t.Fatalf("Pass: %v", err)
	}

	r.Blackhole()
	send(t, c1)
	if err := pong(c1, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("Blackhole, old connection: %v, want a timeout", err)
	}
	c2 := dial(t, r.Addr()) // accepted, held
	send(t, c2)
	if err := pong(c2, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("Blackhole, new connection: %v, want a timeout", err)
	}

	// Healing delivers what was held, like TCP after a partition.
	r.Pass()
	for i, c := range []net.Conn{c1, c2} {
		if err := pong(c, time.Second); err != nil {
			t.Fatalf("Pass after Blackhole, connection %d: held PING not answered: %v", i+1, err)
		}
	}

	r.Reset()
	start := time.Now()
	if err := pong(c1, 2*time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Reset, old connection: %v, want ECONNRESET", err)
	}
	c3, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err == nil { // the kernel completes the handshake; the relay resets it
		defer c3.Close()
		// The socket reports a received RST once: to the write when it
		// came first (a read after it then sees EOF), else to the read.
		if _, err = c3.Write([]byte("PING\r\n")); err == nil {
			err = pong(c3, 2*time.Second)
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Reset, new connection: %v, want ECONNRESET", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Reset errors took %v, want well under 500 ms", d)
	}

	r.Pass()
	c4 := dial(t, r.Addr())
	send(t, c4)
	if err := pong(c4, time.Second); err != nil {
		t.Fatalf("Pass after Reset: %v", err)
	}

	// A counter moves just after its Write returns, possibly after the reply.
	c4.Close()
	want := Stats{Accepted: 4, Resets: 3, BytesToTarget: 4 * 6, BytesFromTarget: 4 * 7}
	if !waitfor.Poll(2*time.Second, func() bool { return r.Stats() == want }) {
		t.Fatalf("Stats = %+v, want %+v", r.Stats(), want)
	}
	r.Close()
	r.Close() // twice is harmless
	if !waitfor.Poll(2*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Fatalf("%d goroutines after Close, %d before Start: the relay leaks", runtime.NumGoroutine(), base)
	}
}

// TestRelayDelay checks that Delay(d) adds at least 2·d to a round trip and
// that Pass removes it.
func TestRelayDelay(t *testing.T) {
	srv := redisserver.Start(t)
	r := Start(t, srv.Addr)
	c := dial(t, r.Addr())
	const d = 150 * time.Millisecond
	r.Delay(d)
	start := time.Now()
	send(t, c)
	if err := pong(c, 2*time.Second); err != nil {
		t.Fatalf("Delay: %v", err)
	}
	if rtt := time.Since(start); rtt < 2*d || rtt > 2*d+500*time.Millisecond {
		t.Fatalf("round trip under Delay(%v) = %v, want [%v, %v]", d, rtt, 2*d, 2*d+500*time.Millisecond)
	}
	r.Pass()
	start = time.Now()
	send(t, c)
	if err := pong(c, time.Second); err != nil {
		t.Fatalf("Pass: %v", err)
	}
	if rtt := time.Since(start); rtt > 100*time.Millisecond {
		t.Fatalf("round trip after Pass = %v, want < 100 ms", rtt)
	}
}

// TestRelayValkeyClient checks what a valkey-go client (the valkey store's
// client) sees through the relay: a deadline under Blackhole, a fast error
// under Reset, and recovery after Pass.
func TestRelayValkeyClient(t *testing.T) {
	srv := redisserver.Start(t)
	r := Start(t, srv.Addr)
	cl, err := valkey.NewClient(valkey.ClientOption{
		InitAddress:       []string{r.Addr()},
		ForceSingleClient: true,
		DisableCache:      true,
		DisableRetry:      true,
	})
	if err != nil {
		t.Fatalf("connecting through the relay: %v", err)
	}
	defer cl.Close()
	ping := func(d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := cl.Do(ctx, cl.B().Ping().Build()).Error()
		return time.Since(start), err
	}
	if _, err := ping(time.Second); err != nil {
		t.Fatalf("Pass: %v", err)
	}
	r.Blackhole()
	if _, err := ping(200 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Blackhole: %v, want context.DeadlineExceeded", err)
	}
	r.Reset()
	if took, err := ping(2 * time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Fatalf("Reset: %v after %v, want a connection error well before the 2 s deadline", err, took)
	}
	r.Pass()
	if !waitfor.Poll(2*time.Second, func() bool { _, err := ping(time.Second); return err == nil }) {
		_, err := ping(time.Second)
		t.Fatalf("after Pass: %v, want recovery within 2 s", err)
	}
}
