package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"

	"rlproxy/internal/policy"
)

// problemKind is one of the answers rlproxy gives in its own name.
type problemKind uint8

const (
	problemRateLimited  problemKind = iota // a policy refused (response.status, default 429)
	problemQueueFull                       // shaping cap reached (response.status)
	problemUnavailable                     // a fail-closed policy could not be decided: 503
	problemNoRoute                         // no route matched: 404
	problemBadGateway                      // upstream unreachable or failed: 502
	problemQuotaLimited                    // the quota endpoint itself is rate limited: 429
)

// problems holds each kind's RFC 9457 type, title and status. Types are
// URNs: stable identifiers that need no web site to resolve.
var problems = [...]struct {
	typ, title, detail string
	status             int
}{
	problemRateLimited:  {"urn:rlproxy:problem:rate-limited", "Too Many Requests", "", http.StatusTooManyRequests},
	problemQueueFull:    {"urn:rlproxy:problem:shaping-queue-full", "Too Many Requests", "the request would wait longer than this proxy queues requests", http.StatusTooManyRequests},
	problemUnavailable:  {"urn:rlproxy:problem:limiter-unavailable", "Service Unavailable", "the rate limiter cannot decide right now and this route fails closed; retry shortly", http.StatusServiceUnavailable},
	problemNoRoute:      {"urn:rlproxy:problem:no-route", "Not Found", "no route matches this request", http.StatusNotFound},
	problemBadGateway:   {"urn:rlproxy:problem:bad-gateway", "Bad Gateway", "the upstream could not be reached or failed", http.StatusBadGateway},
	problemQuotaLimited: {"urn:rlproxy:problem:rate-limited", "Too Many Requests", "the quota endpoint is asked too often", http.StatusTooManyRequests},
}

// problemBody is RFC 9457 problem details plus the rate-limit members the
// brief asks for (whole seconds). Members are omitted when they do not apply.
type problemBody struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Instance   string `json:"instance"`
	Policy     string `json:"policy,omitempty"`
	RetryAfter int64  `json:"retryAfter,omitempty"`
	Limit      *int64 `json:"limit,omitempty"`
	Remaining  *int64 `json:"remaining,omitempty"`
	Reset      *int64 `json:"reset,omitempty"`
	Window     *int64 `json:"window,omitempty"`
}

// writeProblem is the one place rlproxy answers in its own name. For
// refusals (rt and res non-nil) it sets Retry-After and describes the
// binding policy. Every such answer is uncacheable (RFC 6585 §4 for 429).
func writeProblem(w http.ResponseWriter, r *http.Request, kind problemKind, rt *Runtime, res *policy.Result) {
	p := &problems[kind]
	body := problemBody{Type: p.typ, Title: p.title, Status: p.status, Detail: p.detail, Instance: r.URL.Path}
	h := w.Header()
	if res != nil {
		if rt != nil && (kind == problemRateLimited || kind == problemQueueFull) {
			body.Status = rt.Config.Response.Status
		}
		ra := retryAfterSec(res.RetryAfter)
		h[hdrRetryAfter] = []string{strconv.FormatInt(ra, 10)}
		body.RetryAfter = ra
		if res.Binding >= 0 {
			it := &res.Items[res.Binding]
			lim, rem, reset, win := it.Policy.Quota, max(it.Decision.Remaining, 0), ceilSec(it.Decision.ResetAfter), it.Policy.Window
			body.Policy = it.Policy.Name
			body.Limit, body.Remaining, body.Reset, body.Window = &lim, &rem, &reset, &win
			if body.Detail == "" {
				body.Detail = "policy " + strconv.Quote(it.Policy.Name) + " allows " + strconv.FormatInt(lim, 10) +
					" requests per " + strconv.FormatInt(win, 10) + " s; retry in " + strconv.FormatInt(ra, 10) + " s"
			}
		}
	}
	if body.Detail == "" {
		body.Detail = "request refused"
	}
	b, _ := json.Marshal(&body) // cannot fail: strings and ints only
	h["Content-Type"] = []string{"application/problem+json"}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Length"] = []string{strconv.Itoa(len(b) + 1)}
	w.WriteHeader(body.Status)
	_, _ = w.Write(append(b, '\n'))
}
