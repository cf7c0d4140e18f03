package proxy

import (
	"net/http"
	"strconv"
	"unicode/utf8"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
)

// problemKind is one of the answers rlproxy gives in its own name.
type problemKind uint8

const (
	problemRateLimited      problemKind = iota // a policy refused (response.status, default 429)
	problemQueueFull                           // shaping cap reached (response.status)
	problemUnavailable                         // a fail-closed policy could not be decided: 503
	problemNoRoute                             // no route matched: 404
	problemBadGateway                          // upstream unreachable or failed: 502
	problemQuotaLimited                        // the quota endpoint itself is rate limited: 429
	problemBodyTimeout                         // the client stalled sending its body: 408
	problemNoHealthy                           // every server of the pool is out of rotation: 502
	problemGatewayTimeout                      // the upstream did not answer in time: 504
	problemMethodNotAllowed                    // the quota endpoint asked with a method other than GET or HEAD: 405
	problemBadRequest                          // the client's body was malformed (RFC 9112 §7.1): 400
	problemMethod                              // TRACE or CONNECT, never forwarded (as nginx): 405
	problemUnsendable                          // the upstream transport refused to send the request as it came: 400
	problemBodyTooLarge                        // the request body is over max_body_size (nginx client_max_body_size): 413
	problemBadQuotaQuery                       // the quota endpoint's query does not name a request: 400

	// Requests that cannot be read unambiguously (package reqview): 400.
	problemBadMethod
	problemBadTarget
	problemBadPath
	problemBadHost
	problemBadContentLength
	problemDuplicateCredential

	// The decision listeners' own answers (package forwardauth).
	problemUntrustedCaller // the caller is not a trusted proxy: 403
	problemNotDescribed    // a forward-auth request names no original request: 400

	problemOverloaded // the upstream's adaptive concurrency limit shed the request: 503

	problemBanned  // a control entry bans the client (response.status)
	problemPenalty // the client is in a policy's penalty box (response.status)
)

// problems holds each kind's RFC 9457 type, title and status. Types are
// URNs: stable identifiers that need no web site to resolve.
var problems = [...]struct {
	typ, title, detail string
	status             int
}{
	problemRateLimited:      {"urn:rlproxy:problem:rate-limited", "Too Many Requests", "", http.StatusTooManyRequests},
	problemQueueFull:        {"urn:rlproxy:problem:shaping-queue-full", "Too Many Requests", "the request would wait longer than this proxy queues requests", http.StatusTooManyRequests},
	problemUnavailable:      {"urn:rlproxy:problem:limiter-unavailable", "Service Unavailable", "the rate limiter cannot decide right now and this route fails closed; retry shortly", http.StatusServiceUnavailable},
	problemNoRoute:          {"urn:rlproxy:problem:no-route", "Not Found", "no route matches this request", http.StatusNotFound},
	problemBadGateway:       {"urn:rlproxy:problem:bad-gateway", "Bad Gateway", "the upstream could not be reached or failed", http.StatusBadGateway},
	problemQuotaLimited:     {"urn:rlproxy:problem:rate-limited", "Too Many Requests", "the quota endpoint is asked too often", http.StatusTooManyRequests},
	problemBodyTimeout:      {"urn:rlproxy:problem:body-timeout", "Request Timeout", "the request body stalled for longer than server.body_timeout", http.StatusRequestTimeout},
	problemNoHealthy:        {"urn:rlproxy:problem:no-healthy-upstream", "Bad Gateway", "every server of the upstream is out of rotation (health checks or max_fails)", http.StatusBadGateway},
	problemGatewayTimeout:   {"urn:rlproxy:problem:gateway-timeout", "Gateway Timeout", "the upstream did not answer in time", http.StatusGatewayTimeout},
	problemMethodNotAllowed: {"urn:rlproxy:problem:method-not-allowed", "Method Not Allowed", "the quota endpoint answers GET and HEAD only", http.StatusMethodNotAllowed},
	problemBadRequest:       {"urn:rlproxy:problem:bad-request", "Bad Request", "the request body is malformed", http.StatusBadRequest},
	problemMethod:           {"urn:rlproxy:problem:method-not-allowed", "Method Not Allowed", "TRACE and CONNECT are not forwarded", http.StatusMethodNotAllowed},
	problemUnsendable:       {"urn:rlproxy:problem:bad-request", "Bad Request", "the request cannot be forwarded as sent (a method that is not a token, an invalid header field)", http.StatusBadRequest},
	problemBadQuotaQuery:    {"urn:rlproxy:problem:bad-request", "Bad Request", "want ?path=/PATH and, optionally, &method=METHOD, in a query that parses", http.StatusBadRequest},
	problemBodyTooLarge:     {"urn:rlproxy:problem:body-too-large", "Content Too Large", "the request body is larger than this route accepts (max_body_size)", http.StatusRequestEntityTooLarge},

	problemBadMethod:           {"urn:rlproxy:problem:bad-request", "Bad Request", "the method must be a token without lower-case letters", http.StatusBadRequest},
	problemBadTarget:           {"urn:rlproxy:problem:bad-request", "Bad Request", "the request target must be a path, or an absolute URI with a host and no userinfo", http.StatusBadRequest},
	problemBadPath:             {"urn:rlproxy:problem:bad-request", "Bad Request", "the path has a malformed or NUL %-escape, or climbs above the root", http.StatusBadRequest},
	problemBadHost:             {"urn:rlproxy:problem:bad-request", "Bad Request", "the Host is malformed", http.StatusBadRequest},
	problemBadContentLength:    {"urn:rlproxy:problem:bad-request", "Bad Request", "Content-Length must be digits, sent once", http.StatusBadRequest},
	problemDuplicateCredential: {"urn:rlproxy:problem:bad-request", "Bad Request", "a credential (Authorization, or one this route keys by) is sent more than once", http.StatusBadRequest},

	problemUntrustedCaller: {"urn:rlproxy:problem:untrusted-caller", "Forbidden", "only proxies in real_ip.trusted_proxies may ask this listener", http.StatusForbidden},
	problemNotDescribed:    {"urn:rlproxy:problem:no-original-request", "Bad Request", "want X-Forwarded-Uri or X-Original-URI naming the original request", http.StatusBadRequest},

	problemBanned:     {"urn:rlproxy:problem:banned", "Too Many Requests", "an operator banned this client; Retry-After is the time the ban has left", http.StatusTooManyRequests},
	problemPenalty:    {"urn:rlproxy:problem:penalty", "Too Many Requests", "this client was refused too often and is in the policy's penalty box; Retry-After is the time it has left", http.StatusTooManyRequests},
	problemOverloaded: {"urn:rlproxy:problem:overloaded", "Service Unavailable", "the upstream is at its concurrency limit and this request's priority class is over its share; retry later", http.StatusServiceUnavailable},
}

// ietfQuotaExceeded is the ratelimit-headers draft-11 problem type of a
// refusal (response.problem_types: ietf), requested from IANA by the
// draft, not yet registered.
const ietfQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// writeProblem is the one place rlproxy answers in its own name. For
// refusals (rt and res non-nil) it sets Retry-After and describes the
// binding policy. Every such answer is uncacheable (RFC 6585 §4 for 429).
//
// The body is RFC 9457 problem details plus the rate-limit members of
// docs/PRODUCT.md "Responses" (whole seconds), members in this order: type, title,
// status, detail, instance, then requestId (the request's id, requestid.go),
// policy, retryAfter, limit, remaining, reset, window only when they apply,
// and on a refusal by the route's policies violated-policies (draft-11: the
// names of the policies that refused, possibly none for a shaping cap). It is appended into one buffer (the
// refusal path is hot under attack) with encoding/json's string escaping,
// so the bytes are what json.Marshal of the former struct gave.
func writeProblem(w http.ResponseWriter, r *http.Request, kind problemKind, rt *Runtime, res *policy.Result) {
	p := &problems[kind]
	status, detail := p.status, p.detail
	h := w.Header()
	var (
		ra   int64
		it   *policy.Item
		vals = new([4]string) // Retry-After, Content-Type, Cache-Control, Content-Length
	)
	if res != nil {
		if rt != nil && (kind == problemRateLimited || kind == problemQueueFull || kind == problemBanned || kind == problemPenalty) {
			status = rt.Config.Response.Status
		}
		ra = policy.CeilSeconds(res.RetryAfter)
		if res.Binding >= 0 {
			it = &res.Items[res.Binding]
		}
	}
	var now int64
	if res != nil {
		now = res.Now
	}
	var d [256]byte
	db := appendDetail(d[:0], detail, it, ra, now)
	if isGRPC(r) {
		writeGRPCProblem(w, kind, db, ra, res != nil)
		return
	}
	// One allocation (Write's argument escapes): sized for a refusal body
	// with a short path; a long one grows it.
	b := append(make([]byte, 0, 512), `{"type":`...)
	typ := p.typ
	if kind == problemRateLimited && rt != nil && rt.Config.Response.ProblemTypes == config.ProblemTypesIETF {
		typ = ietfQuotaExceeded
	}
	b = appendJSONString(b, typ)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"detail":`...)
	b = appendJSONString(b, db)
	b = append(b, `,"instance":`...)
	b = appendJSONString(b, r.URL.Path)
	if id := problemRequestID(r); id != "" {
		b = append(b, `,"requestId":`...)
		b = appendJSONString(b, id)
	}
	if it != nil && it.Policy.Name != "" {
		b = append(b, `,"policy":`...)
		b = appendJSONString(b, it.Policy.Name)
	}
	if ra != 0 {
		b = append(b, `,"retryAfter":`...)
		b = strconv.AppendInt(b, ra, 10)
	}
	if it != nil {
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, it.Policy.Quota, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, max(it.Decision.Remaining, 0), 10)
		b = append(b, `,"reset":`...)
		b = strconv.AppendInt(b, resetSeconds(it.Decision.ResetAfter), 10)
		b = append(b, `,"window":`...)
		b = strconv.AppendInt(b, it.Policy.WindowAt(res.Now), 10)
	}
	if rt != nil && res != nil { // draft-11's member, on every refusal by the route's policies
		var names [8]string
		b = append(b, `,"violated-policies":[`...)
		for j, n := range res.ViolatedPolicies(names[:0]) {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	if res != nil {
		vals[0] = strconv.FormatInt(ra, 10)
		h[hdrRetryAfter] = vals[0:1:1]
	}
	vals[1], vals[2], vals[3] = "application/problem+json", "no-store", strconv.Itoa(len(b))
	h["Content-Type"] = vals[1:2:2]
	h["Cache-Control"] = vals[2:3:3]
	h["Content-Length"] = vals[3:4:4]
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendDetail appends a problem's detail: the kind's own, or for a
// refusal `policy "NAME" allows N requests per W s; retry in R s`.
func appendDetail(b []byte, detail string, it *policy.Item, ra, now int64) []byte {
	switch {
	case detail != "":
		return append(b, detail...)
	case it != nil:
		b = append(b, "policy "...)
		b = strconv.AppendQuote(b, it.Policy.Name)
		b = append(b, " allows "...)
		b = strconv.AppendInt(b, it.Policy.Quota, 10)
		b = append(b, " requests per "...)
		b = strconv.AppendInt(b, it.Policy.WindowAt(now), 10)
		b = append(b, " s; retry in "...)
		b = strconv.AppendInt(b, ra, 10)
		return append(b, " s"...)
	}
	return append(b, "request refused"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json writes
// it (HTML-safe): '"', '\\' and control characters escaped (\b \f \n \r \t
// short forms), '<', '>', '&', U+2028 and U+2029 as \u escapes, invalid
// UTF-8 as U+FFFD.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		var rb [utf8.UTFMax]byte
		r, size := utf8.DecodeRune(rb[:copy(rb[:], s[i:])])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
