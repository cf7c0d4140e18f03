package proxy

import (
	"net/http"
	"strconv"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
)

// Header names as the specifications spell them. They are assigned to the
// response header map directly (no canonicalisation), so the wire shows
// "RateLimit-Policy", not Go's canonical "Ratelimit-Policy"; HTTP field
// names are case-insensitive (RFC 9110 §5.1) either way.
const (
	hdrPolicy          = "RateLimit-Policy" // IETF httpapi ratelimit-headers draft
	hdrRateLimit       = "RateLimit"
	hdrLegacyLimit     = "RateLimit-Limit" // the older draft (-03)
	hdrLegacyRemaining = "RateLimit-Remaining"
	hdrLegacyReset     = "RateLimit-Reset"
	hdrXLimit          = "X-RateLimit-Limit" // GitHub style; reset is epoch seconds
	hdrXRemaining      = "X-RateLimit-Remaining"
	hdrXReset          = "X-RateLimit-Reset"
	hdrRetryAfter      = "Retry-After"
)

// upstreamQuotaHeaders are the same names in Go's canonical form, as an
// upstream response's parsed header map holds them.
var upstreamQuotaHeaders = [...]string{"Ratelimit-Policy", "Ratelimit", "Ratelimit-Limit", "Ratelimit-Remaining",
	"Ratelimit-Reset", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}

// ceilSec is ms → whole seconds rounded up (CONFIG-SPEC: t may be 0).
func ceilSec(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}

// retryAfterSec is the Retry-After value: delay-seconds (RFC 9110 §10.2.3),
// rounded up, never 0.
func retryAfterSec(ms int64) int64 { return max(ceilSec(ms), 1) }

// setQuotaHeaders writes the configured header sets for res onto h: every
// response of a limited route carries them, allowed or not (CONFIG-SPEC).
// Policies the store could not decide, and exempt ones, are left out.
func setQuotaHeaders(h http.Header, sets config.HeaderSet, res *policy.Result) {
	if res.Binding < 0 {
		return
	}
	if sets&config.HeadersRateLimit != 0 {
		var pol, rl []byte
		for i := range res.Items {
			it := &res.Items[i]
			if res.KeyFor(i) == "" || it.Unknown {
				continue
			}
			if len(pol) > 0 {
				pol = append(pol, ", "...)
				rl = append(rl, ", "...)
			}
			p := it.Policy
			pol = append(pol, p.HeaderName...)
			pol = append(pol, ";q="...)
			pol = strconv.AppendInt(pol, p.Quota, 10)
			pol = append(pol, ";w="...)
			pol = strconv.AppendInt(pol, p.Window, 10)
			rl = append(rl, p.HeaderName...)
			rl = append(rl, ";r="...)
			rl = strconv.AppendInt(rl, max(it.Decision.Remaining, 0), 10)
			rl = append(rl, ";t="...)
			rl = strconv.AppendInt(rl, ceilSec(it.Decision.ResetAfter), 10)
		}
		h[hdrPolicy] = []string{string(pol)}
		h[hdrRateLimit] = []string{string(rl)}
	}
	b := &res.Items[res.Binding]
	limit := strconv.FormatInt(b.Policy.Quota, 10)
	remaining := strconv.FormatInt(max(b.Decision.Remaining, 0), 10)
	if sets&config.HeadersRateLimitLegacy != 0 {
		h[hdrLegacyLimit] = []string{limit}
		h[hdrLegacyRemaining] = []string{remaining}
		h[hdrLegacyReset] = []string{strconv.FormatInt(ceilSec(b.Decision.ResetAfter), 10)}
	}
	if sets&config.HeadersXRateLimit != 0 {
		h[hdrXLimit] = []string{limit}
		h[hdrXRemaining] = []string{remaining}
		h[hdrXReset] = []string{strconv.FormatInt(ceilSec(res.Now+b.Decision.ResetAfter), 10)}
	}
}

// stripQuotaHeaders removes quota headers an upstream may have sent, so the
// client sees only rlproxy's (which are already on the response writer).
func stripQuotaHeaders(h http.Header) {
	for _, k := range upstreamQuotaHeaders {
		delete(h, k)
	}
}
