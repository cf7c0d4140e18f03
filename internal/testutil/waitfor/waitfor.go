// Package waitfor lets a test wait for a condition with a deadline instead of
// sleeping a guessed time: the wait ends as soon as the condition holds, so a
// fast machine is not slowed and a loaded one is given room.
package waitfor

import (
	"testing"
	"time"
)

// Timeout is how long True waits: generous, because a deadline that is
// reached means a failure, never a slow machine.
const Timeout = 30 * time.Second

// True polls cond until it returns true and fails t (Fatal) if it has not
// after Timeout; what names the condition in the failure. Polls start 1 ms
// apart and back off to 50 ms, so an expensive cond (an HTTP request, a
// command) is not run in a tight loop.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is True with its own limit, for a test whose assertion is that cond
// holds within limit; it returns how long cond took to hold.
func Within(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !Poll(limit, cond) {
		t.Fatalf("%s: not so after %v", what, limit)
	}
	return time.Since(start)
}

// Poll polls cond like True until it holds (true) or limit has passed
// (false), for a caller that reports the failure itself.
func Poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for every := time.Millisecond; !cond(); every = min(2*every, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
