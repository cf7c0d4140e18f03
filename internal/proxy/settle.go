package proxy

import (
	"net/http"

	"rlproxy/internal/policy"
)

// statusClientClosed settles a request whose client left before any
// response status was sent (nginx's 499 "client closed request").
const statusClientClosed = 499

// forwardSettled forwards r through h and then settles res with the
// response's status (policy.Limiter.Settle, for count_status): the status
// the upstream answered, the one rlproxy answered in its place (502 for an
// upstream failure, 504, 408 for a stalled body), or 499 when the client
// left before any status was sent. It settles once the whole response,
// trailers included, has been written, so a reservation is held for as
// long as its response streams.
func forwardSettled(w http.ResponseWriter, r *http.Request, l *policy.Limiter, h http.Handler, res *policy.Result) {
	sw := &statusWriter{ResponseWriter: w}
	h.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = statusClientClosed
	}
	l.Settle(res, policy.Settlement{Status: status})
}

// statusWriter records the final status of the response written through
// it; Unwrap lets http.ResponseController (which ReverseProxy uses to
// flush and to switch protocols) reach the connection's writer.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until a final status (not 1xx, except 101) is written
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
