package h1

import "time"

// SetReadTimeout bounds each wait for the rest of the current response's
// body to d (0: no bound) instead of Pool.ReadTimeout: a stream whose
// pauses are its protocol's (server-sent events) is bounded by the
// proxy's stream idle timeout. It holds until the next ReadResponse.
func (u *UpstreamConn) SetReadTimeout(d time.Duration) { _ = u.rd.setIdle(d) }
