package config

import (
	"net/textproto"
	"slices"
	"strconv"
	"strings"

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

// algorithm describes one `algorithm:` value: its kind and the fields only
// it takes (besides the fields common to every policy).
type algorithm struct {
	name   string
	kind   algo.Kind
	fields []string
}

// algorithms lists the policy algorithms of CONFIG-SPEC, in its order.
func algorithms() []algorithm {
	bucket := []string{"rate", "burst"}
	window := []string{"limit", "window"}
	calendar := []string{"limit", "window", "calendar", "timezone"} // calendar.go
	return []algorithm{
		{"leaky_bucket", algo.LeakyBucket, []string{"rate", "burst", "nodelay", "delay"}},
		{"token_bucket", algo.TokenBucket, bucket},
		{"fixed_window", algo.FixedWindow, calendar},
		{"sliding_log", algo.SlidingLog, window},
		{"sliding_window", algo.SlidingWindow, calendar},
		{"concurrency", algo.Concurrency, []string{"limit", "lease"}},
	}
}

// policy decodes one entry of `policies:`.
func (d *decoder) policy(e entry) *Policy {
	path := join("policies", e.name)
	p := &Policy{Name: e.name, Line: e.key.Line, Key: defaultKey()}
	if !validName(e.name) {
		d.errorf(e.key, path, "policy name %q: use only letters, digits, '_', '-' and '.' (it appears in store keys and response headers)", e.name)
	}
	algoFields := []string{"rate", "burst", "nodelay", "delay", "limit", "window", "lease", "calendar", "timezone"}
	o := d.object(e.val, path, e.key.Line, slices.Concat([]string{"algorithm", "key", "combine",
		"ipv4_prefix", "ipv6_prefix", "on_store_error", "dry_run", "exempt", "fallback", "count_status"}, algoFields)...)
	if o.bad {
		return p
	}

	if k, ok := d.keySpec(o); ok {
		p.Key = k
	}
	if n := o.get("on_store_error"); n != nil {
		if s, ok := d.oneOf(n, o.field("on_store_error"), "allow", "deny"); ok && s == "deny" {
			p.OnStoreError = FailClosed
		}
	}
	if n := o.get("dry_run"); n != nil {
		p.DryRun, _ = d.boolean(n, o.field("dry_run"))
	}
	if n := o.get("exempt"); n != nil {
		p.Exempt, _ = d.prefixes(n, o.field("exempt"))
	}
	if n := o.get("fallback"); n != nil {
		if p.OnStoreError == FailClosed {
			d.errorf(o.keys["fallback"], o.field("fallback"), "applies only while failing open; this policy has on_store_error: deny")
		} else {
			fo := d.object(n, o.field("fallback"), o.keys["fallback"].Line, "rate", "burst")
			if l, ok := d.bucket(fo, "token_bucket", algo.Limit{Kind: algo.TokenBucket}); ok && d.limitValid(n, fo.path, l) {
				p.Fallback = &l
			}
		}
	}

	if !o.has("algorithm") {
		d.errorf(o.missing(), o.field("algorithm"), "required; want %s", orList(algorithmNames()))
		return p
	}
	name, ok := d.oneOf(o.get("algorithm"), o.field("algorithm"), algorithmNames()...)
	if !ok {
		return p
	}
	a := algorithms()[slices.Index(algorithmNames(), name)]
	for _, f := range algoFields {
		if o.has(f) && !slices.Contains(a.fields, f) {
			d.errorf(o.keys[f], o.field(f), "field %q does not apply to algorithm %s (it takes %s)", f, a.name, strings.Join(a.fields, ", "))
		}
	}
	var l algo.Limit
	switch a.kind {
	case algo.LeakyBucket, algo.TokenBucket:
		l, ok = d.bucket(o, a.name, algo.Limit{Kind: a.kind})
	case algo.Concurrency:
		l, ok = d.window(o, a, "lease", defaultLease)
	default:
		l, ok = d.windowOrCalendar(o, a)
	}
	if ok && d.limitValid(o.get("algorithm"), path, l) {
		p.Limit = l
	}
	d.countStatus(o, a.kind, p)
	return p
}

// algorithmNames lists the `algorithm:` values.
func algorithmNames() []string {
	var names []string
	for _, a := range algorithms() {
		names = append(names, a.name)
	}
	return names
}

// defaultKey is a policy's key when `key:` is absent: the client IP, whole.
func defaultKey() KeySpec {
	return KeySpec{Sources: []Source{{Kind: SourceIP}}, IPv4Prefix: 32, IPv6Prefix: 128}
}

// bucket decodes rate/burst (and for the leaky bucket nodelay/delay) of o
// into a bucket limit of kind def.Kind; def supplies defaults (Count 0 =
// rate required). Rules (CONFIG-SPEC): rate > 0; leaky_bucket burst ≥ 0,
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
	minBurst := int64(0)
	if def.Kind == algo.TokenBucket {
		minBurst = 1
	}
	burstOK := true
	if n := o.get("burst"); n != nil {
		l.Burst, burstOK = d.integer(n, o.field("burst"), minBurst, maxBurst)
	} else if minBurst > 0 && def.Burst == 0 {
		d.errorf(o.missing(), o.field("burst"), "required for %s: the bucket's capacity in requests, at least 1", algoName)
		burstOK = false
	}
	ok = ok && burstOK
	if def.Kind != algo.LeakyBucket {
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
	const want = "want N r/s, N r/m, N r/h or N r/d"
	s := n.Value
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "%s: %s", describe(n), want)
		return 0, 0, false
	}
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
		d.errorf(n, path, "%q: %s", s, want)
		return 0, 0, false
	}
	count, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil || count > maxRatePerSecond*period/1000:
		d.errorf(n, path, "%q: must be at most %d r/s", s, maxRatePerSecond)
	case count == 0:
		d.errorf(n, path, "%q: must be greater than 0", s)
	default:
		return count, period, true
	}
	return 0, 0, false
}

// defaultLease is a concurrency lease's TTL when `lease:` is absent (ms): a
// request still running after it is renewed, one whose instance died frees
// its slot after it.
const defaultLease = 30_000

// window decodes limit plus a period field (window, or lease for
// concurrency; defPeriod ms when absent, 0 = required) into a limit of
// Count requests per Period ms.
func (d *decoder) window(o object, a algorithm, periodField string, defPeriod int64) (algo.Limit, bool) {
	l, ok := algo.Limit{Kind: a.kind, Period: defPeriod}, true
	if n := o.get("limit"); n != nil {
		l.Count, ok = d.integer(n, o.field("limit"), 1, algo.MaxCountFor(a.kind))
	} else {
		d.errorf(o.missing(), o.field("limit"), "required for %s: requests per %s, at least 1", a.name, periodField)
		ok = false
	}
	if n := o.get(periodField); n != nil {
		v, good := d.duration(n, o.field(periodField), false)
		l.Period, ok = v.Milliseconds(), ok && good
	} else if defPeriod == 0 {
		d.errorf(o.missing(), o.field(periodField), "required for %s: a duration such as 10s, 1h", a.name)
		ok = false
	}
	if !ok || a.kind == algo.Concurrency {
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

// keySpec decodes key, combine, ipv4_prefix and ipv6_prefix of a policy.
func (d *decoder) keySpec(o object) (KeySpec, bool) {
	k, ok := defaultKey(), true
	if n := o.get("combine"); n != nil {
		k.Combine, ok = d.boolean(n, o.field("combine"))
	}
	if n := o.get("key"); n != nil {
		srcs, good := d.sources(n, o.field("key"), k.Combine)
		if good {
			k.Sources = srcs
		}
		ok = ok && good
	}
	for _, f := range []struct {
		name string
		bits int64
		dst  *int
	}{{"ipv4_prefix", 32, &k.IPv4Prefix}, {"ipv6_prefix", 128, &k.IPv6Prefix}} {
		if n := o.get(f.name); n != nil {
			v, good := d.integer(n, o.field(f.name), 0, f.bits)
			if good {
				*f.dst = int(v)
			}
			ok = ok && good
		}
	}
	return k, ok
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
	const want = "want ip, global, header:NAME, query:NAME, cookie:NAME or jwt:CLAIM"
	kinds := map[string]SourceKind{"header": SourceHeader, "query": SourceQuery, "cookie": SourceCookie, "jwt": SourceJWT}
	switch s {
	case "ip":
		return Source{Kind: SourceIP}, ""
	case "global":
		return Source{Kind: SourceGlobal}, ""
	}
	kind, name, found := strings.Cut(s, ":")
	k, known := kinds[kind]
	if !found || !known {
		return src, "unknown key source; " + want + didYouMean(kind, []string{"ip", "global", "header", "query", "cookie", "jwt"})
	}
	if name == "" {
		return src, "missing the name after " + kind + ":"
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
