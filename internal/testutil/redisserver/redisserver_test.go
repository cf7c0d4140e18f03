package redisserver

import (
	"testing"
)

// TestStartRestart checks the harness itself: a fresh server answers, keeps
// its port across Restart and comes back empty (nothing persisted).
func TestStartRestart(t *testing.T) {
	s := Start(t)
	if err := s.Do(t, "SET", "k", "v").Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := s.Do(t, "GET", "k").ToString(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	addr := s.Addr
	s.Stop()
	if err := s.Do(t, "PING").Error(); err == nil {
		t.Fatalf("PING succeeded on a stopped server")
	}
	s.Restart()
	if s.Addr != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr, addr)
	}
	if n, err := s.Do(t, "EXISTS", "k").AsInt64(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after Restart = %d, %v; want 0 (no persistence)", n, err)
	}
}
