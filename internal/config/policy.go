package config

import (
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// Bounds that turn typos into errors rather than a limit that is silently
// unlimited or deny-all: a rate (and a window shorter than rateWindow) of
// at most maxRatePerSecond. Longer windows are quotas (10^12 a day), bounded
// like bursts by algo.(*Limit).Validate, which keeps the arithmetic exact.
const (
	maxRatePerSecond = 1_000_000     // requests per second
	rateWindow       = 3_600_000     // ms: shorter windows are rates
	maxBurst         = algo.MaxBurst // requests
)

// algorithms lists the policy algorithms (algo.Kinds, whose descriptors
// hold each one's name and fields) in docs/CONTRACT.md's order.
func algorithms() []*algo.Algorithm {
	as := slices.Clone(algo.Kinds())
	slices.SortFunc(as, func(a, b *algo.Algorithm) int { return a.Listed - b.Listed })
	return as
}

// Whole-address prefix lengths: an ip key's default grouping (none).
const (
	ipv4Bits = 32
	ipv6Bits = 128
)

// validNamePattern is validName as a JSON Schema pattern.
const validNamePattern = `^[A-Za-z0-9_.-]+$`

// defaultKey is the key of a policy that sets none of its key fields: the
// client IP, whole (the policy table's defaults).
func defaultKey() KeySpec {
	p := &Policy{}
	d := &decoder{errs: &Errors{}}
	d.policySection(p).applyDefaults("")
	return p.Key
}

// policy decodes one entry of `policies:`.
func (d *decoder) policy(e entry) *Policy {
	path := join("policies", e.name)
	p := &Policy{Name: e.name, Line: e.key.Line}
	if !validName(e.name) {
		d.errorf(e.key, path, "policy name %q: use only letters, digits, '_', '-' and '.' (it appears in store keys and response headers)", e.name)
	}
	d.decode(e.val, path, e.key.Line, d.policySection(p))
	return p
}

// policySection is one policy: the fields common to every algorithm
// (decoded in table order: combine before key, on_store_error before
// fallback), then the algorithm and its own fields (in the check: which
// apply depends on the algorithm).
func (d *decoder) policySection(p *Policy) *section {
	k := &p.Key
	key := value{func() schema { return listShape(stringShape(), true) }, func(n *yaml.Node, path string) {
		if srcs, ok := d.sources(n, path, k.Combine); ok {
			k.Sources = srcs
		}
	}}
	onError := value{func() schema { return enumShape("allow", "deny") }, func(n *yaml.Node, path string) {
		if s, ok := d.oneOf(n, path, "allow", "deny"); ok && s == "deny" {
			p.OnStoreError = FailClosed
		} else if ok {
			p.OnStoreError = FailOpen
		}
	}}
	return &section{
		fields: slices.Concat([]field{
			{name: "algorithm", value: checked(func() schema { return enumShape(algorithmNames()...) }), need: "required",
				doc: "leaky_bucket (nginx limit_req), token_bucket, fixed_window, sliding_log, sliding_window (counter) or concurrency (requests in flight)."},
			{name: "combine", def: "false", value: d.boolVal(&k.Combine), doc: "true: all key sources together form the key; false: the first present one."},
			{name: "key", def: "ip", value: key, doc: "Key sources, one or a list: ip, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM, tls:spki, tls:subject, tls:san:dns, tls:san:uri, tls:san:email."},
			{name: "ipv4_prefix", def: strconv.Itoa(ipv4Bits), value: d.intVal(&k.IPv4Prefix, 0, ipv4Bits), doc: "ip keys: IPv4 clients of one /N share a key."},
			{name: "ipv6_prefix", def: strconv.Itoa(ipv6Bits), value: d.intVal(&k.IPv6Prefix, 0, ipv6Bits), doc: "ip keys: IPv6 clients of one /N share a key."},
			{name: "on_store_error", def: "allow", value: onError, doc: "When the store cannot decide: allow (fail open, down to fallback) or deny (503)."},
			{name: "dry_run", def: "false", value: d.boolVal(&p.DryRun), doc: "Would-be refusals pass and are counted (nginx limit_req_dry_run)."},
			{name: "exempt", value: d.prefixesVal(&p.Exempt), doc: "Client addresses or CIDRs that pass uncounted."},
			{name: "fallback", value: checked(func() schema { return objectShape(fallbackSection()) }), doc: "Per-instance token bucket applied while the store is down and the policy fails open; absent: allow all."},
			{name: "allotment", sub: d.allotmentSection(p),
				doc: "With the valkey store: an instance decides a key it sees often from a slice of the key's allowance, taken from the store ahead (the bounds per algorithm: the operator's reference, Allotments). Not for sliding_log, sliding_window, leaky_bucket or concurrency. Absent: every request is decided in the store."},
			{name: "penalty", sub: d.penaltySection(p),
				doc: "Penalty box: after `after` refusals of one client within `within`, refuse it for `for` (rlproxy_penalties_total). Absent: off."},
			{name: "count_status", value: checked(countStatusShape),
				doc: "Only responses with these statuses are charged (codes 100 to 599, classes \"1xx\" to \"5xx\"); the charge is settled after the response; not for concurrency. Absent: every request counts."},
		}, d.algorithmFields()),
		check: func(o object) {
			if !o.bad {
				d.fallback(o, p)
				d.policyLimit(o, p)
				d.allotmentValid(o, p)
			}
		},
		extend: d.extendPolicy,
	}
}

// algorithmFields are the fields only some algorithms take (their value
// decoded by bucket or window).
func (d *decoder) algorithmFields() []field {
	return []field{
		{name: "rate", value: checked(rateShape), doc: "Buckets: N r/s, N r/m, N r/h or N r/d (exact: 30r/m is 30 per minute)."},
		{name: "burst", value: checked(func() schema { return intShape(0, maxBurst) }), doc: "leaky_bucket: excess requests allowed beyond the rate (default 0, as nginx); token_bucket: the capacity, at least 1, required."},
		{name: "nodelay", def: "false", value: checked(boolShape), doc: "leaky_bucket: serve the burst at once instead of delaying the excess."},
		{name: "delay", def: "0", value: checked(func() schema { return intShape(0, maxBurst) }), doc: "leaky_bucket: the first N excess requests are not delayed (nginx delay=N); at most burst, not with nodelay."},
		{name: "limit", value: checked(func() schema { return intShape(1, algo.MaxWindowCount) }),
			doc: "Windows: requests per window (fixed_window and sliding_window up to 10^12, sliding_log 100000); concurrency: requests in flight."},
		{name: "window", value: checked(func() schema { return durationShape(false) }), doc: "Windows: the window, a whole number of milliseconds."},
		{name: "calendar", value: checked(func() schema { return enumShape(calendarUnits[:]...) }),
			doc: "fixed_window, sliding_window: calendar periods instead of window: day, week (from Monday), month or year, in timezone."},
		{name: "timezone", def: "UTC", value: checked(stringShape), doc: "With calendar: the IANA time zone the periods start in, such as Europe/Berlin."},
		{name: "lease", def: defaultLease.String(), value: checked(func() schema { return durationShape(false) }), doc: "concurrency: a request's slot expires after this unless renewed (an instance that died frees its slots)."},
	}
}

// fallbackSection is a policy's `fallback:` floor: a token bucket.
func fallbackSection() *section {
	return &section{fields: []field{
		{name: "rate", need: "required", value: checked(rateShape), doc: "Refill, N r/s (or r/m, r/h, r/d)."},
		{name: "burst", need: "required", value: checked(func() schema { return intShape(1, maxBurst) }), doc: "Capacity, requests."},
	}}
}

// fallback decodes a policy's `fallback:` (after on_store_error).
func (d *decoder) fallback(o object, p *Policy) {
	n := o.get("fallback")
	if n == nil {
		return
	}
	if p.OnStoreError == FailClosed {
		d.errorf(o.keys["fallback"], o.field("fallback"), "applies only while failing open; this policy has on_store_error: deny")
		return
	}
	fo := d.object(n, o.field("fallback"), o.keys["fallback"].Line, fallbackSection().names()...)
	if l, ok := d.bucket(fo, "token_bucket", algo.Limit{Kind: algo.TokenBucket}); ok && d.limitValid(n, fo.path, l) {
		p.Fallback = &l
	}
}

// policyLimit decodes the algorithm and its fields.
func (d *decoder) policyLimit(o object, p *Policy) {
	if !o.has("algorithm") {
		d.errorf(o.missing(), o.field("algorithm"), "required; want %s", orList(algorithmNames()))
		return
	}
	name, ok := d.oneOf(o.get("algorithm"), o.field("algorithm"), algorithmNames()...)
	if !ok {
		return
	}
	a := algorithms()[slices.Index(algorithmNames(), name)]
	for _, f := range d.algorithmFields() {
		if o.has(f.name) && !a.Has(f.name) {
			d.errorf(o.keys[f.name], o.field(f.name), "field %q does not apply to algorithm %s (it takes %s)", f.name, a.Name, strings.Join(a.Fields, ", "))
		}
	}
	var l algo.Limit
	switch {
	case a.Has("rate"):
		l, ok = d.bucket(o, a.Name, algo.Limit{Kind: a.Kind})
	case a.Has("lease"):
		l, ok = d.window(o, a, "lease", defaultLease.Milliseconds())
	default:
		l, ok = d.windowOrCalendar(o, a)
	}
	if ok && d.limitValid(o.get("algorithm"), o.path, l) {
		p.Limit = l
	}
	d.countStatus(o, a.Kind, p)
}

// extendPolicy adds to the policy schema each algorithm's rule: the
// fields it requires, and none of the algorithm fields it does not take.
func (d *decoder) extendPolicy(s schema) {
	var rules []any
	for _, a := range algorithms() {
		banned := schema{}
		for _, f := range d.algorithmFields() {
			if !a.Has(f.name) {
				banned[f.name] = false
			}
		}
		if a.Has("limit") {
			banned["limit"] = schema{"maximum": algo.MaxCountFor(a.Kind)}
		}
		required := make([]any, len(a.Required))
		for i, f := range a.Required {
			required[i] = f
		}
		then := schema{"properties": banned, "required": required}
		if a.Has("calendar") {
			then["oneOf"] = []any{schema{"required": []any{"window"}}, schema{"required": []any{"calendar"}}}
		}
		rules = append(rules, schema{
			"if":   schema{"properties": schema{"algorithm": schema{"const": a.Name}}, "required": []any{"algorithm"}},
			"then": then,
		})
	}
	s["allOf"] = rules
}

// algorithmNames lists the `algorithm:` values.
func algorithmNames() []string {
	var names []string
	for _, a := range algorithms() {
		names = append(names, a.Name)
	}
	return names
}

// bucket decodes rate/burst (and for the leaky bucket nodelay/delay) of o
// into a bucket limit of kind def.Kind; def supplies defaults (Count 0 =
// rate required). Rules (docs/CONTRACT.md): rate > 0; leaky_bucket burst ≥ 0,
// default 0 as nginx; token_bucket burst ≥ 1, required; delay ≤ burst and
// never with nodelay.
func (d *decoder) bucket(o object, algoName string, def algo.Limit) (algo.Limit, bool) {
	l, ok := def, true
	if n := o.get("rate"); n != nil {
		c, p, good := d.rate(n, o.field("rate"))
		l.Count, l.Period, ok = c, p, good
	} else if def.Count == 0 {
		d.errorf(o.missing(), o.field("rate"), "required for %s; want N r/s, N r/m, N r/h or N r/d", algoName)
		ok = false
	}
	a := algo.Describe(def.Kind)
	minBurst := a.MinBurst
	burstOK := true
	if n := o.get("burst"); n != nil {
		l.Burst, burstOK = d.integer(n, o.field("burst"), minBurst, maxBurst)
	} else if minBurst > 0 && def.Burst == 0 {
		d.errorf(o.missing(), o.field("burst"), "required for %s: the bucket's capacity in requests, at least 1", algoName)
		burstOK = false
	}
	ok = ok && burstOK
	if !a.Has("nodelay") {
		return l, ok
	}
	if n := o.get("nodelay"); n != nil {
		var good bool
		l.NoDelay, good = d.boolean(n, o.field("nodelay"))
		ok = ok && good
	}
	if n := o.get("delay"); n != nil {
		delay, good := d.integer(n, o.field("delay"), 0, maxBurst)
		switch {
		case !good:
			ok = false
		case l.NoDelay:
			d.errorf(n, o.field("delay"), "cannot be used with nodelay: true (nodelay already serves the whole burst at once)")
			ok = false
		case burstOK && delay > l.Burst:
			d.errorf(n, o.field("delay"), "%d exceeds burst %d (use nodelay: true to serve the whole burst at once)", delay, l.Burst)
			ok = false
		default:
			l.Delay = delay
		}
	}
	return l, ok
}

// rate parses "N r/s", "N r/m", "N r/h" or "N r/d" (the space optional, as
// nginx writes 10r/s) into Count requests per Period ms, exactly: 30r/m is
// 30 per 60000 ms, not nginx's 0.5 r/s truncated to milli-requests.
func (d *decoder) rate(n *yaml.Node, path string) (count, period int64, ok bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "%s: %s", describe(n), rateWant)
		return 0, 0, false
	}
	count, period, err := ParseRate(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, 0, false
	}
	return count, period, true
}

// rateWant is what a malformed rate is told to look like.
const rateWant = "want N r/s, N r/m, N r/h or N r/d"

// ParseRate parses a rate as a policy's `rate:` spells it ("N r/s", "N
// r/m", "N r/h" or "N r/d", the space optional) into count requests per
// period ms, within the bounds `rate:` has; the error quotes s.
func ParseRate(s string) (count, period int64, err error) {
	num, unit, found := strings.Cut(s, "r/")
	num = strings.TrimSpace(num)
	switch unit {
	case "s":
		period = 1000
	case "m":
		period = 60_000
	case "h":
		period = 3_600_000
	case "d":
		period = 86_400_000
	}
	if !found || period == 0 || num == "" || strings.Trim(num, "0123456789") != "" {
		return 0, 0, fmt.Errorf("%q: %s", s, rateWant)
	}
	count, perr := strconv.ParseInt(num, 10, 64)
	switch {
	case perr != nil || count > maxRatePerSecond*period/1000:
		return 0, 0, fmt.Errorf("%q: must be at most %d r/s", s, maxRatePerSecond)
	case count == 0:
		return 0, 0, fmt.Errorf("%q: must be greater than 0", s)
	}
	return count, period, nil
}

// defaultLease is a concurrency lease's TTL when `lease:` is absent: a
// request still running after it is renewed, one whose instance died frees
// its slot after it.
const defaultLease = 30 * time.Second

// window decodes limit plus a period field (window, or lease for
// concurrency; defPeriod ms when absent, 0 = required) into a limit of
// Count requests per Period ms.
func (d *decoder) window(o object, a *algo.Algorithm, periodField string, defPeriod int64) (algo.Limit, bool) {
	l, ok := algo.Limit{Kind: a.Kind, Period: defPeriod}, true
	if n := o.get("limit"); n != nil {
		l.Count, ok = d.integer(n, o.field("limit"), 1, algo.MaxCountFor(a.Kind))
	} else {
		d.errorf(o.missing(), o.field("limit"), "required for %s: requests per %s, at least 1", a.Name, periodField)
		ok = false
	}
	if n := o.get(periodField); n != nil {
		v, good := d.duration(n, o.field(periodField), false)
		l.Period, ok = v.Milliseconds(), ok && good
	} else if defPeriod == 0 {
		d.errorf(o.missing(), o.field(periodField), "required for %s: a duration such as 10s, 1h", a.Name)
		ok = false
	}
	if !ok || a.Leases {
		return l, ok
	}
	if l.Period < rateWindow && l.Count > maxRatePerSecond*l.Period/1000 {
		d.errorf(o.get("limit"), o.field("limit"), "%d per %s is more than %d r/s", l.Count, o.get(periodField).Value, maxRatePerSecond)
		return l, false
	}
	return l, true
}

// limitValid runs algo's own check on a limit built from valid fields: it
// catches combinations no single field shows (count or burst × period past
// the bounds of exact arithmetic).
func (d *decoder) limitValid(n *yaml.Node, path string, l algo.Limit) bool {
	if err := l.Validate(); err != nil {
		d.errorf(n, path, "%v", err)
		return false
	}
	return true
}

// sources decodes a key: one source or a list. Without combine the first
// present source wins, so a source after ip or global (always present)
// could never be used: that is an error, as are duplicates.
func (d *decoder) sources(n *yaml.Node, path string, combine bool) ([]Source, bool) {
	items, vals, ok := d.strings(n, path, true)
	if !ok {
		return nil, false
	}
	if len(vals) == 0 {
		d.errorf(n, path, "want at least one key source")
		return nil, false
	}
	var out []Source
	for i, s := range vals {
		field := path
		if n.Kind == yaml.SequenceNode {
			field = index(path, i)
		}
		src, msg := parseSource(s)
		switch {
		case msg != "":
			d.errorf(items[i], field, "%q: %s", s, msg)
		case slices.Contains(out, src):
			d.errorf(items[i], field, "%q: listed twice", s)
		case !combine && len(out) > 0 && (out[len(out)-1].Kind == SourceIP || out[len(out)-1].Kind == SourceGlobal):
			d.errorf(items[i], field, "%q: never used: %q before it is always present", s, vals[i-1])
		default:
			out = append(out, src)
			continue
		}
		ok = false
	}
	return out, ok
}

// parseSource parses one key source; msg explains a mistake ("" = none).
func parseSource(s string) (src Source, msg string) {
	const want = "want ip, global, header:NAME, query:NAME, cookie:NAME, jwt:CLAIM or tls:FIELD"
	kinds := map[string]SourceKind{"header": SourceHeader, "query": SourceQuery, "cookie": SourceCookie, "jwt": SourceJWT, "tls": SourceTLS}
	switch s {
	case "ip":
		return Source{Kind: SourceIP}, ""
	case "global":
		return Source{Kind: SourceGlobal}, ""
	}
	kind, name, found := strings.Cut(s, ":")
	k, known := kinds[kind]
	if !found || !known {
		return src, "unknown key source; " + want + didYouMean(kind, []string{"ip", "global", "header", "query", "cookie", "jwt", "tls"})
	}
	if name == "" {
		return src, "missing the name after " + kind + ":"
	}
	if k == SourceTLS && !slices.Contains(TLSFields, name) {
		return src, "unknown certificate field; want tls:" + strings.Join(TLSFields, ", tls:") + didYouMean(name, TLSFields)
	}
	if (k == SourceHeader || k == SourceCookie) && !isToken(name) {
		return src, kind + " name must be an HTTP token (RFC 9110 §5.6.2)"
	}
	if k == SourceHeader {
		name = textproto.CanonicalMIMEHeaderKey(name)
	}
	return Source{Kind: k, Name: name}, ""
}

// isToken reports whether s is an RFC 9110 §5.6.2 token (header, cookie and
// method names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validName reports whether a policy name is letters, digits, '_', '-' and
// '.': it appears verbatim in store keys, metric labels and the quoted
// strings of RateLimit-Policy, so nothing there needs escaping.
func validName(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return s != ""
}
