package proxy

import (
	"net/http"
	"strconv"
	"strings"
)

// statusClientClosed settles a request whose client left before any
// response status was sent (nginx's 499 "client closed request").
const statusClientClosed = 499

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
	return costValue(v[0])
}

// costValue reads one cost header value: a whole number ≥ 0, spaces
// around it ignored.
func costValue(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
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
