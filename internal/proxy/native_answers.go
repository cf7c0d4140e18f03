package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unsafe"

	"rlproxy/internal/config"
	"rlproxy/internal/h1"
	"rlproxy/internal/policy"
)

// rlproxy's own answers on the engine's path (refusals, 404, 413, 502,
// 504...) are written by the same code as on net/http's (problem.go,
// answers.go, upstream_errors.go) into answerWriter, a buffered
// http.ResponseWriter, then sent as one h1 head and a fixed-length body.
// That path allocates what writeProblem allocates (its header values and
// body: about five allocations for a 429 with quota headers); the header
// map itself is reused.

// answerWriter buffers one answer of rlproxy's: its header map (reused,
// cleared per request), status and body.
type answerWriter struct {
	w      *h1.ResponseWriter
	header http.Header
	status int
	body   []byte
	keys   []string
}

func (a *answerWriter) reset(w *h1.ResponseWriter) {
	if a.header == nil {
		a.header = http.Header{}
	}
	clear(a.header)
	a.w, a.status, a.body = w, 0, a.body[:0]
}

// Header implements http.ResponseWriter.
func (a *answerWriter) Header() http.Header { return a.header }

// WriteHeader implements http.ResponseWriter.
func (a *answerWriter) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

// Write implements http.ResponseWriter.
func (a *answerWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	a.body = append(a.body, p...)
	return len(p), nil
}

// flush sends the buffered answer to w: its fields in name order (as
// net/http writes a header map), "Connection: close" when the answer or
// the connection asks for it (the connection then closes), the body with
// its Content-Length.
func (a *answerWriter) flush(w *h1.ResponseWriter) {
	if a.status == 0 {
		return
	}
	closing := w.Closing()
	if c := a.header["Connection"]; len(c) > 0 && c[0] == "close" {
		closing = true
		w.CloseAfter()
	}
	a.keys = a.keys[:0]
	for k := range a.header {
		if k != "Connection" && k != "Content-Length" {
			a.keys = append(a.keys, k)
		}
	}
	slices.Sort(a.keys)
	head := h1.AppendStatusLine(w.Scratch(), a.status, http.StatusText(a.status))
	if closing {
		head = h1.AppendField(head, "Connection", "close")
	}
	for _, k := range a.keys {
		for _, v := range a.header[k] {
			head = h1.AppendField(head, k, v)
		}
	}
	head = append(head, "Content-Length: "...)
	head = strconv.AppendInt(head, int64(len(a.body)), 10)
	head = append(head, "\r\n"...)
	if w.WriteHead(append(head, "\r\n"...), h1.Length, int64(len(a.body))) == nil {
		_, _ = w.Write(a.body)
	}
}

// answerRequest readies the http.Request rlproxy's answers are written
// for (problem.go reads its path as the problem's instance and its
// request id; upstream_errors.go its context): the view's fields, no body,
// the background context (the engine watches the client only while it
// waits for the response head: h1.UpstreamConn.WatchClient).
func (n *nativeCall) answerRequest(r *h1.Request) {
	v := &n.rc.view
	clear(n.hdr)
	n.url = url.URL{Path: v.Path}
	n.req = http.Request{Method: v.Method, URL: &n.url, Proto: v.Proto, ProtoMajor: 1, ProtoMinor: r.ProtoMinor(),
		Header: n.hdr, Host: v.RawHost, RequestURI: v.Target, TLS: v.TLS, ContentLength: -1}
	id := n.rc.requestID
	if id == "" {
		id = incomingRequestID(&r.Header)
	}
	if id != "" {
		n.idv[0] = id
		n.hdr["X-Request-Id"] = n.idv[:]
	}
}

// requestID is requestid.go's requestID for the engine: an incoming
// X-Request-Id, else a traceparent's trace id, else a new random one,
// which the upstream then receives too (edits.go).
func (n *nativeCall) requestID(r *h1.Request) string {
	if id := incomingRequestID(&r.Header); id != "" {
		return id
	}
	n.newID = true
	var b [16]byte
	_, _ = rand.Read(b[:])
	hex.Encode(n.id[:], b[:])
	return bytesString(n.id[:])
}

// incomingRequestID is the id a request came with: its X-Request-Id (one
// field, 1 to 128 visible ASCII characters), else the trace id of its
// one traceparent; "" for none.
func incomingRequestID(h *h1.Header) string {
	if v, n := only(h, "X-Request-Id"); n == 1 && validRequestID(v) {
		return v
	}
	if v, n := only(h, "Traceparent"); n == 1 {
		return traceparentID(v)
	}
	return ""
}

// only returns the first value of the field name in h and how many
// fields of that name there are (counted up to 2).
func only(h *h1.Header, name string) (first string, n int) {
	h.Values(name, func(v string) bool {
		if n == 0 {
			first = v
		}
		n++
		return n < 2
	})
	return first, n
}

// appendQuotaFields appends the quota header fields sets selects for res
// as head lines, with the values setQuotaHeaders gives on net/http's path
// (appendQuotaValues).
func appendQuotaFields(dst []byte, sets config.HeaderSet, res *policy.Result) []byte {
	if !quotaHeadersOn(sets, res) {
		return dst
	}
	var buf [512]byte
	b, ends := appendQuotaValues(buf[:0], sets, res)
	var vals [qhCount][]byte
	from := 0
	for i, end := range ends {
		if end > 0 {
			vals[i], from = b[from:end], end
		}
	}
	field := func(name string, i int) {
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		dst = append(dst, vals[i]...)
		dst = append(dst, "\r\n"...)
	}
	if sets&config.HeadersRateLimit != 0 {
		field(hdrPolicy, qhPolicy)
		field(hdrRateLimit, qhRateLimit)
	}
	if sets&config.HeadersRateLimitLegacy != 0 {
		field(hdrLegacyLimit, qhLimit)
		field(hdrLegacyRemaining, qhRemaining)
		field(hdrLegacyReset, qhLegacyReset)
	}
	if sets&config.HeadersXRateLimit != 0 {
		field(hdrXLimit, qhLimit)
		field(hdrXRemaining, qhRemaining)
		field(hdrXReset, qhXReset)
	}
	return dst
}

// bytesString returns b's bytes as a string without a copy: b must not
// change while the string is used (a request's buffers, until it ends).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
