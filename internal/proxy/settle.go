package proxy

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"

	"rlproxy/internal/policy"
)

// statusClientClosed settles a request whose client left before any
// response status was sent (nginx's 499 "client closed request").
const statusClientClosed = 499

// forwardSettled forwards r through h and then settles res
// (policy.Limiter.Settle) with the response's status — the status the
// upstream answered, the one rlproxy answered in its place (502 for an
// upstream failure, 504, 408 for a stalled body), or 499 when the client
// left before any status was sent — and, for a route with a
// cost_response_header, the whole-number cost its response reported. It
// settles once the whole response, trailers included, has been written,
// so a reservation is held for as long as its response streams.
func (s *Server) forwardSettled(w http.ResponseWriter, r *http.Request, rt *Runtime, route *policy.Route, h http.Handler, res *policy.Result) {
	sw := &statusWriter{ResponseWriter: w}
	s.forward(h, sw, r, rt.Config.Response.Headers, res)
	refundTooLarge(rt.Limiter, r, res) // then Settle does nothing
	st := policy.Settlement{Status: sw.status}
	if st.Status == 0 {
		st.Status = statusClientClosed
	}
	if name := route.CostResponseHeader; name != "" {
		st.Cost, st.HasCost = responseCost(w.Header(), name)
		if !st.HasCost && upstreamAnswered(st.Status) {
			s.metrics.CostHeaderInvalid(route.Name)
		}
	}
	rt.Limiter.Settle(res, st)
}

// responseCost reads the cost header name from a written response's
// header map: the header, else the trailer (which ReverseProxy copies into
// the map after the body, under its name when announced and under
// http.TrailerPrefix otherwise: chunked and gRPC responses). The value
// must be one whole number ≥ 0.
func responseCost(h http.Header, name string) (int64, bool) {
	v := h[name]
	if len(v) == 0 {
		v = h[http.TrailerPrefix+name]
	}
	if len(v) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	return n, err == nil && n >= 0
}

// upstreamAnswered reports whether status came from the upstream rather
// than from rlproxy in its place (a failure, a stalled body, a client
// gone): only an upstream's answer without a usable cost is counted as
// invalid.
func upstreamAnswered(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusRequestTimeout, statusClientClosed:
		return false
	}
	return true
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

// Hijack is record.Hijack's for the settlement: an upgraded session
// settles as 101.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return hijackSwitching(w.ResponseWriter, &w.status)
}
