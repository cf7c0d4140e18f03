package proxy

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"time"

	"rlproxy/internal/metrics"
	"rlproxy/internal/reqview"
	"rlproxy/internal/tracing"
	upstreampkg "rlproxy/internal/upstream"
)

// record is one request's account for the traffic metrics, the access
// log and its admission's settlement: the one response recorder of the
// std engine, the response writer seen by the rest of the request path,
// which notes the status and bytes sent, plus what the path decided (the
// admission). Pooled by Server; Unwrap lets http.ResponseController reach
// the connection (flushes, hijacks for upgrades, deadlines).
type record struct {
	http.ResponseWriter
	status int   // first non-1xx status written; 0 = none yet
	bytes  int64 // body bytes written

	start   time.Time
	route   string                // "" = no route matched
	traffic *metrics.RouteTraffic // the route's series
	// adm is the request's admission (admission.go), with the access
	// log's verdict.
	adm admission
	up  upstreampkg.Exchange
	// body is the request's watched body (withClientBody); nil: none.
	body *clientBody
	// logging is set when the access log is on; requestID is then the
	// request's id (requestid.go).
	logging   bool
	requestID string
	// trace is the request's server span (trace.go); zero when untraced.
	trace tracing.Span
	// closeAfter closes the connection after a final answer other than a
	// 101 (closesUnlessSwitched).
	closeAfter bool
	// view is the request's view (reqview.Read), read once by every
	// part of the request path.
	view reqview.View
}

// Access log decision values.
const (
	decisionAllowed     = "allowed"
	decisionDelayed     = "delayed"
	decisionRejected    = "rejected"
	decisionUnavailable = "unavailable"
	decisionNoRoute     = "no-route"
	decisionUnlimited   = "unlimited"   // a route without policies
	decisionQuota       = "quota"       // the quota endpoint answered
	decisionBadRequest  = "bad-request" // refused with 400 before routing (reqview)
	decisionTooLarge    = "too-large"   // refused for a declared body over max_body_size
	decisionShed        = "shed"        // refused by the upstream's adaptive concurrency limit (503 overloaded)
)

func (rc *record) reset(w http.ResponseWriter, start time.Time) {
	*rc = record{ResponseWriter: w, start: start}
}

// WriteHeader notes the final status (1xx informational answers precede it).
func (rc *record) WriteHeader(code int) {
	if rc.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rc.final(code)
	}
	rc.ResponseWriter.WriteHeader(code)
}

func (rc *record) Write(p []byte) (int, error) {
	if rc.status == 0 {
		rc.final(http.StatusOK)
	}
	n, err := rc.ResponseWriter.Write(p)
	rc.bytes += int64(n)
	return n, err
}

// final notes the final status code, about to be written, and asks for
// the connection to be closed after it when closeAfter is set and code does
// not switch protocols. (A 101 ReverseProxy writes on the hijacked
// connection never comes here.)
func (rc *record) final(code int) {
	rc.status = code
	if rc.closeAfter && code != http.StatusSwitchingProtocols {
		rc.Header()["Connection"] = closeConn
	}
}

// Unwrap is for http.ResponseController.
func (rc *record) Unwrap() http.ResponseWriter { return rc.ResponseWriter }

// Hijack hands the connection over for a protocol switch. ReverseProxy
// hijacks only once the upstream answered 101 and writes that 101 on the
// connection itself, never through WriteHeader, so the hijack is where the
// status becomes known: an upgraded session (WebSocket) is recorded as 101,
// not as a client that left (499).
func (rc *record) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := hijackSwitching(rc.ResponseWriter, &rc.status)
	return c, brw, err
}

// hijackSwitching hijacks w's connection for a protocol switch and, on
// success, notes 101 in *status unless a status was already written.
func hijackSwitching(w http.ResponseWriter, status *int) (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err == nil && *status == 0 {
		*status = http.StatusSwitchingProtocols
	}
	return c, brw, err
}

// finalStatus implements response: the final status, 499 (nginx's
// "client closed request") when none was sent.
func (rc *record) finalStatus() int {
	if rc.status == 0 {
		return statusClientClosed
	}
	return rc.status
}

// cost implements response from the written header map (responseCost).
func (rc *record) cost(name string) (int64, bool) { return responseCost(rc.Header(), name) }

// bodyTooLarge implements response.
func (rc *record) bodyTooLarge() bool { return rc.body != nil && rc.body.tooLarge.Load() }

// sampled implements response: the slot's hold time is the upstream's
// latency unless no upstream response came or it was a 5xx (a failure: an
// overloaded upstream's instant 503s counted as deliveries raised the
// limit from its 4 workers to 128, TestOverloadFastErrors), or it is an
// event stream (its length is the client's, not the upstream's).
func (rc *record) sampled() bool {
	return rc.up.Status != 0 && rc.up.Status < 500 &&
		!strings.HasPrefix(rc.Header().Get("Content-Type"), "text/event-stream")
}

// finish counts the answer in its route's series (route "-" when none
// matched). A request that got no answer at all (the client left first)
// counts as 499, nginx's code for it.
func (rc *record) finish(rt *Runtime, now time.Time) {
	rc.status = rc.finalStatus()
	t := rc.traffic
	if rc.route == "" {
		t = rt.noRoute
	}
	t.Observe(rc.status, now.Sub(rc.start))
}
