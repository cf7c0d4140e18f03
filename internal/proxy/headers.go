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

// resetSeconds is a reset in ms (RateLimit's t, RateLimit-Reset, the quota
// endpoint's reset, or an instant for X-RateLimit-Reset) in whole seconds
// rounded up; unlike policy.CeilSeconds it may be 0 (docs/CONTRACT.md: a
// quota that is full again now resets in 0 s).
func resetSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}

// setQuotaHeaders writes the configured header sets for res onto h: every
// response of a limited route carries them, allowed or not (docs/CONTRACT.md).
// Policies the store could not decide, and exempt ones, are left out.
//
// Hot path: every value is appended to one stack buffer, copied into one
// string and sliced from it, and the []string values share one backing
// array — two allocations per response whatever the header sets.
func setQuotaHeaders(h http.Header, sets config.HeaderSet, res *policy.Result) {
	if !quotaHeadersOn(sets, res) {
		return
	}
	var buf [512]byte
	b, ends := appendQuotaValues(buf[:0], sets, res)
	all := string(b)
	vals := new([qhCount]string)
	from := 0
	for i, end := range ends {
		if end > 0 {
			vals[i], from = all[from:end], end
		}
	}
	// Each value is a capped one-element window of vals, so an append
	// by a later writer copies instead of overwriting its neighbour.
	v := func(i int) []string { return vals[i : i+1 : i+1] }
	if sets&config.HeadersRateLimit != 0 {
		h[hdrPolicy] = v(qhPolicy)
		h[hdrRateLimit] = v(qhRateLimit)
	}
	if sets&config.HeadersRateLimitLegacy != 0 {
		h[hdrLegacyLimit] = v(qhLimit)
		h[hdrLegacyRemaining] = v(qhRemaining)
		h[hdrLegacyReset] = v(qhLegacyReset)
	}
	if sets&config.HeadersXRateLimit != 0 {
		h[hdrXLimit] = v(qhLimit)
		h[hdrXRemaining] = v(qhRemaining)
		h[hdrXReset] = v(qhXReset)
	}
}

// quotaHeadersOn reports whether sets has a quota header to write for res.
func quotaHeadersOn(sets config.HeaderSet, res *policy.Result) bool {
	return res.Binding >= 0 && sets&(config.HeadersRateLimit|config.HeadersRateLimitLegacy|config.HeadersXRateLimit) != 0
}

// appendQuotaValues appends to b the values of the quota headers sets
// selects for res, one after the other; ends[i] is where value i (qhPolicy
// ...) ends in the result, 0 for a value not built. Both engines write
// their headers from it (setQuotaHeaders, appendQuotaFields).
func appendQuotaValues(b []byte, sets config.HeaderSet, res *policy.Result) (_ []byte, ends [qhCount]int) {
	if sets&config.HeadersRateLimit != 0 {
		first := true
		for i := range res.Items {
			it := &res.Items[i]
			if res.KeyFor(i) == "" || it.Unknown {
				continue
			}
			if !first {
				b = append(b, ", "...)
			}
			first = false
			p := it.Policy
			b = append(b, p.HeaderName...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, p.Quota, 10)
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, p.WindowAt(res.Now), 10)
			if qu := p.QuotaUnit(); qu != "" {
				b = append(b, ";qu="...)
				b = append(b, qu...)
			}
			b = res.AppendPartitionKey(b, i)
		}
		ends[qhPolicy] = len(b)
		first = true
		for i := range res.Items {
			it := &res.Items[i]
			if res.KeyFor(i) == "" || it.Unknown {
				continue
			}
			if !first {
				b = append(b, ", "...)
			}
			first = false
			b = append(b, it.Policy.HeaderName...)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, max(it.Decision.Remaining, 0), 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, resetSeconds(it.Decision.ResetAfter), 10)
			b = res.AppendPartitionKey(b, i)
		}
		ends[qhRateLimit] = len(b)
	}
	bd := &res.Items[res.Binding]
	if sets&(config.HeadersRateLimitLegacy|config.HeadersXRateLimit) != 0 {
		b = strconv.AppendInt(b, bd.Policy.Quota, 10)
		ends[qhLimit] = len(b)
		b = strconv.AppendInt(b, max(bd.Decision.Remaining, 0), 10)
		ends[qhRemaining] = len(b)
	}
	if sets&config.HeadersRateLimitLegacy != 0 {
		b = strconv.AppendInt(b, resetSeconds(bd.Decision.ResetAfter), 10)
		ends[qhLegacyReset] = len(b)
	}
	if sets&config.HeadersXRateLimit != 0 {
		b = strconv.AppendInt(b, resetSeconds(res.Now+bd.Decision.ResetAfter), 10)
		ends[qhXReset] = len(b)
	}
	return b, ends
}

// Indices of the values setQuotaHeaders builds (limit and remaining serve
// both the legacy and the X- sets).
const (
	qhPolicy = iota
	qhRateLimit
	qhLimit
	qhRemaining
	qhLegacyReset
	qhXReset
	qhCount
)

// stripQuotaHeaders removes quota headers an upstream may have sent, so the
// client sees only rlproxy's (which are already on the response writer).
func stripQuotaHeaders(h http.Header) {
	for _, k := range upstreamQuotaHeaders {
		delete(h, k)
	}
}

// headerEdit is one direction's configured header edits of an upstream
// (upstreams.NAME.request_headers / response_headers), prepared once per
// config: each set value is a capped one-element slice shared by every
// request (an append elsewhere copies it; nothing writes into it).
type headerEdit struct {
	remove []string
	names  []string
	vals   [][]string
}

func newHeaderEdit(r config.HeaderRules) headerEdit {
	e := headerEdit{remove: r.Remove}
	for _, h := range r.Set {
		e.names = append(e.names, h.Name)
		e.vals = append(e.vals, []string{h.Value}[:1:1])
	}
	return e
}

// apply removes, then sets, e's headers on h.
func (e headerEdit) apply(h http.Header) {
	for _, k := range e.remove {
		delete(h, k)
	}
	for i, k := range e.names {
		h[k] = e.vals[i]
	}
}
