package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"rlproxy/internal/accesslog"
	"rlproxy/internal/tracing"
)

// requestID returns r's id: an incoming X-Request-Id (1 to 128 visible
// ASCII characters), else the trace id of a W3C traceparent (both kept and
// forwarded as they came), else a new random one, set as r's
// X-Request-Id so the upstream receives it too.
func requestID(r *http.Request) string {
	if v := r.Header["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return v[0]
	}
	if id := traceID(r.Header); id != "" {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	r.Header["X-Request-Id"] = []string{id}
	return id
}

// problemRequestID is the requestId member of a problem+json answer to
// r: the id requestID kept or set, "" when there is none; with tracing on,
// the trace id (as in the access log).
func problemRequestID(r *http.Request) string {
	if id := tracing.TraceID(r.Context()); id != "" {
		return id
	}
	h := r.Header
	if v := h["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return v[0]
	}
	return traceID(h)
}

// traceID is the trace-id of a version-00 traceparent
// ("00-<32 hex>-<16 hex>-<2 hex>", W3C Trace Context §3.2), or "".
func traceID(h http.Header) string {
	if v := h["Traceparent"]; len(v) == 1 {
		return traceparentID(v[0])
	}
	return ""
}

// traceparentID is traceID's reading of one traceparent value v.
func traceparentID(v string) string {
	if len(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return ""
	}
	return v[3:35]
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// SetAccessLog makes l the access log of requests that end from now on
// (nil: none) and returns the previous one, for the caller to Close once
// in-flight requests are done.
func (s *Server) SetAccessLog(l *accesslog.Logger) *accesslog.Logger { return s.access.Swap(l) }

// AccessLog returns the current access log, or nil.
func (s *Server) AccessLog() *accesslog.Logger { return s.access.Load() }

// logAccess writes rc's line, from its request view.
func (s *Server) logAccess(l *accesslog.Logger, rc *record, rt *Runtime, now time.Time) {
	v := &rc.view
	ua, _ := v.Header.Get("User-Agent")
	ref, _ := v.Header.Get("Referer")
	e := accesslog.Entry{
		Time: rc.start, Client: rc.up.ClientIP, Peer: v.Peer, Method: v.Method, Host: v.RawHost,
		Path: v.RawPath, Query: v.Query, Proto: v.Proto, UserAgent: ua, Referer: ref,
		Status: rc.status, Bytes: rc.bytes, Duration: now.Sub(rc.start),
		Route: rc.route, Decision: rc.adm.decision, Policy: rc.adm.policy, WaitMS: rc.adm.waitMS,
		Upstream: rc.up.Server, UpstreamStatus: rc.up.Status, UpstreamTime: rc.up.Duration, Retries: rc.up.Retries,
		RequestID: rc.requestID, Redact: rt.redact,
	}
	l.Log(&e)
}
