package config

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// tlsSection is `tls:`. Both files are loaded as a pair, so a bad
// certificate fails here (and on reload) rather than at the first handshake.
func (l *loader) tlsSection() *section {
	var t TLS
	var ok [2]bool
	file := func(dst *string, i int) value {
		return value{stringShape, func(n *yaml.Node, path string) { *dst, ok[i] = l.filePath(n, path, l.dir) }}
	}
	acme := false // tls.acme present: the certificate files are optional
	static := func() bool { return !acme }
	return &section{
		optional: true,
		pre:      func(o object) { acme = o.has("acme") },
		fields: []field{
			{name: "cert_file", need: "required: a PEM file", needed: static, value: file(&t.CertFile, 0), doc: "PEM certificate chain; with acme, the certificate for the names acme does not cover."},
			{name: "key_file", need: "required: a PEM file", needed: static, value: file(&t.KeyFile, 1), doc: "PEM private key."},
			{name: "client_ca", value: value{stringShape, func(n *yaml.Node, path string) { t.ClientCA, _ = l.caFile(n, path) }},
				doc: "PEM bundle of the CAs client certificates must chain to (mTLS); reloaded with the certificate."},
			{name: "client_crl", value: value{stringShape, func(n *yaml.Node, path string) { t.ClientCRL, _ = l.filePath(n, path, l.dir) }},
				doc: "Certificate revocation list (PEM or DER) signed by a CA of client_ca: client certificates it lists are refused; reloaded when the file changes."},
			{name: "client_auth", value: l.enumVal(&t.ClientAuth, ClientAuthNone, ClientAuthRequest, ClientAuthRequire),
				doc: "none; request: verify a certificate if the client gives one; require: refuse a client without a verified one. Default: require with client_ca, none without."},
			{name: "client_headers", def: "false", value: l.boolVal(&t.ClientHeaders),
				doc: "Send the verified client certificate's subject and SHA-256 fingerprint to the upstream (X-Client-Cert-Subject, X-Client-Cert-Fingerprint), the client's own copies removed."},
			{name: "acme", sub: l.acmeSection(&t.ACME), doc: "Obtain and renew certificates from an ACME CA (RFC 8555: Let's Encrypt by default) for the listed names."},
		},
		extend: func(sc schema) {
			// The certificate pair, or acme, or both.
			sc["anyOf"] = []any{schema{"required": []any{"cert_file", "key_file"}}, schema{"required": []any{"acme"}}}
		},
		check: func(o object) {
			if o.bad || acme && t.ACME == nil {
				return
			}
			if !ok[0] || !ok[1] {
				if !acme || !l.certPairOptional(o) {
					return // a missing or bad file is reported
				}
			} else if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
				l.errorf(o.missing(), o.path, "loading certificate and key: %v", err)
				return
			}
			if !l.clientAuth(o, &t) {
				return
			}
			l.c.TLS = &t
		},
	}
}

// logSection is `log:`.
func (l *loader) logSection() *section {
	g := &l.c.Log
	levels := []string{"debug", "info", "warn", "error"}
	level := value{func() schema { return enumShape(levels...) }, func(n *yaml.Node, path string) {
		if s, ok := l.oneOf(n, path, levels...); ok {
			_ = g.Level.UnmarshalText([]byte(s)) // cannot fail: s is one of slog's names
		}
	}}
	access, accessOn := l.accessLogSection()
	return &section{fields: []field{
		{name: "level", def: "info", value: level, doc: "Least severe level logged; changed on reload."},
		{name: "format", def: "text", value: l.enumVal(&g.Format, "text", "json"), doc: "Line format; changed on restart only."},
		{name: "refusals_per_second", def: "10", value: l.intVal(&g.RefusalsPerSecond, 0, 1_000_000),
			doc: "Refusal log lines per second per instance; the rest are counted, not logged."},
		{name: "access", sub: access, doc: "Access log, one line per request; present turns it on unless enabled: false."},
	}, check: accessOn}
}

// serverSection is `server:`.
func (l *loader) serverSection() *section {
	s := &l.c.Server
	return &section{fields: append([]field{
		{name: "read_header_timeout", def: "10s", value: l.durationVal(&s.ReadHeaderTimeout, false), doc: "Longest a client may take to send the request headers."},
		{name: "idle_timeout", def: "120s", value: l.durationVal(&s.IdleTimeout, false), doc: "Longest an idle keep-alive connection stays open."},
		{name: "body_timeout", def: "60s", value: l.durationVal(&s.BodyTimeout, true), doc: "Longest gap between two reads of a request body (nginx client_body_timeout); 0 = none."},
		{name: "max_body_size", def: "0", value: l.byteSizeVal(&s.MaxBodySize), doc: "Largest request body, bytes or 1MiB-style, of a route that sets none (nginx client_max_body_size); 0 = no limit."},
		{name: "shutdown_timeout", def: "30s", value: l.durationVal(&s.ShutdownTimeout, false), doc: "How long in-flight and waiting requests get at shutdown."},
		{name: "max_wait", def: "30s", value: l.durationVal(&s.MaxWait, true), doc: "Longest delay of one request; a longer wait is refused."},
		{name: "max_header_bytes", def: "1048576", value: l.intVal(&s.MaxHeaderBytes, 1024, 64<<20), doc: "Largest request header block, bytes."},
		{name: "max_waiting", def: "10000", value: l.intVal(&s.MaxWaiting, 0, 10_000_000), doc: "Requests held in leaky-bucket delay per instance; beyond it a request that would wait is refused."},
		{name: "write_timeout", def: DefaultWriteTimeout.String(), value: l.durationVal(&s.WriteTimeout, true),
			doc: "Longest a write of the response to a slow client may stall (nginx send_timeout); 0 = none."},
		{name: "max_connections", def: "0", value: l.intVal(&s.MaxConnections, 0, maxConnectionsLimit),
			doc: "Most client connections open at once on the public listener; 0 = derived from the open-file limit."},
		{name: "max_connections_per_client", value: l.optIntVal(&s.MaxConnectionsPerClient, 0, maxConnectionsLimit),
			doc: "Most connections one client address (IPv6: its /64) may hold open on the public listener, counted after a PROXY protocol header; absent = derived from max_connections (an eighth, at least min(64, half)); 0 = off."},
		{name: "shutdown_delay", def: DefaultShutdownDelay.String(), value: l.durationVal(&s.ShutdownDelay, true),
			doc: "At shutdown, how long /readyz answers 503 before the listener closes (load balancers see it); 0 = none."},
		{name: "h2c", def: "false", value: l.boolVal(&s.H2C), doc: "Accept cleartext HTTP/2 with prior knowledge on a plain listener, next to HTTP/1.1."},
		{name: "stream_idle_timeout", def: "0", value: l.durationVal(&s.StreamIdleTimeout, true),
			doc: "Longest a gRPC client may leave between two messages of its stream (body_timeout does not apply to gRPC); 0 = none."},
		{name: "proxy_protocol", sub: l.proxyProtocolSection(), doc: "Read PROXY protocol v1/v2 headers from trusted load balancers on the public listener; absent: off."},
		{name: "engine", def: cmp.Or(l.opts.DefaultEngine, EngineAuto), value: l.enumVal(&s.Engine, EngineAuto, EngineStd),
			doc: "What serves HTTP/1.x on the public listener: auto (rlproxy's HTTP/1.1 engine; HTTP/2, h2c and gRPC on net/http) or std (net/http alone); changed on restart only."},
	}, l.priorityFields()...)}
}

// storeSection is `store:`. Valkey secrets are read only when the Valkey
// store is selected; the key-hash secret always (both stores hash).
func (l *loader) storeSection() *section {
	s := &l.c.Store
	return &section{fields: []field{
		{name: "type", def: "memory", value: l.enumVal(&s.Type, "memory", "valkey"), doc: "memory: one instance; valkey: shared by every instance."},
		{name: "max_keys", def: "1000000", value: l.intVal(&s.MaxKeys, 1, 1_000_000_000), doc: "Memory store: most keys tracked; the least recently used are evicted."},
		{name: "key_hash_secret_env", value: l.secretVal(&s.HashSecret, 16),
			doc: "Environment variable holding the secret (at least 16 bytes) that keys the hash of credential-derived client ids; the same on every instance sharing a store."},
		{name: "breaker", sub: l.breakerSection(), doc: "Circuit breaker in front of the Valkey store."},
		{name: "valkey", sub: l.valkeySection(), doc: "The Valkey store: a node, several seeds of a Valkey Cluster, or Sentinels."},
	}, extend: func(sc schema) {
		// The Valkey store needs addresses.
		sc["if"] = schema{"properties": schema{"type": schema{"const": "valkey"}}, "required": []any{"type"}}
		sc["then"] = schema{"required": []any{"valkey"}, "properties": schema{"valkey": schema{
			"type": "object", "required": []any{"addrs"}, "properties": schema{"addrs": schema{"minItems": 1}}}}}
	}}
}

// breakerSection is `store.breaker:`.
func (l *loader) breakerSection() *section {
	b := &l.c.Store.Breaker
	return &section{fields: []field{
		{name: "failures", def: "5", value: l.intVal(&b.Failures, 1, 1_000_000), doc: "Consecutive store errors that open the breaker."},
		{name: "cooldown", def: "500ms", value: l.durationVal(&b.Cooldown, false), doc: "How long an open breaker skips the store before probing it."},
		{name: "failure_ratio", def: "0.5", value: l.ratioVal(&b.FailureRatio),
			doc: "Share of failed store calls in window, in (0, 1], that opens the breaker (once min_calls were made); a half-open breaker judges its probes by it."},
		{name: "window", def: "10s", value: l.durationVal(&b.Window, false), doc: "Sliding window over which failure_ratio is measured."},
		{name: "min_calls", def: "20", value: l.intVal(&b.MinCalls, 1, 1_000_000), doc: "Calls in window before failure_ratio can open the breaker."},
	}}
}

// valkeySection is `store.valkey:`; its addresses are required and its
// password read only when store.type is valkey (decoded before it).
func (l *loader) valkeySection() *section {
	v := &l.c.Store.Valkey
	used := func() bool { return l.c.Store.Type == "valkey" }
	const needAddrs = "required with store type valkey: one address, or several seeds of a cluster"
	addrs := value{func() schema { return listShape(addrShape(), true) }, func(n *yaml.Node, path string) {
		items, addrs, ok := l.strings(n, path, true)
		for i, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				l.errorf(items[i], index(path, i), "%q: want HOST:PORT", a)
				ok = false
			}
		}
		if ok {
			v.Addrs = addrs
		}
		if used() && len(v.Addrs) == 0 && len(n.Content) == 0 { // null, [] or one bad address
			l.errorf(n, path, "%s", needAddrs)
		}
	}}
	password := value{envNameShape, func(n *yaml.Node, path string) {
		if used() {
			v.Password, _ = l.secretEnv(n, path, 1)
		}
	}}
	caFile := value{stringShape, func(n *yaml.Node, path string) {
		if !v.TLS {
			l.errorf(n, path, "needs tls: true")
		} else {
			v.CAFile, _ = l.caFile(n, path)
		}
	}}
	prefix := value{func() schema { return schema{"type": "string", "pattern": "^[^{}]*$"} }, func(n *yaml.Node, path string) {
		if s, ok := l.str(n, path); ok && strings.ContainsAny(s, "{}") {
			l.errorf(n, path, "%q: must not contain { or } (the client id is the key's Cluster hash tag)", s)
		} else if ok {
			v.KeyPrefix = s
		}
	}}
	localCache := value{boolShape, func(n *yaml.Node, path string) {
		if b, ok := l.boolean(n, path); ok {
			v.DisableLocalCache = !b
		}
	}}
	return &section{
		fields: []field{
			{name: "addrs", need: needAddrs, needed: used, value: addrs, doc: "HOST:PORT of one node, or several seeds of a cluster (or the Sentinels); required with type valkey."},
			{name: "username", value: l.strVal(&v.Username), doc: "ACL user name."},
			{name: "password_env", value: password, doc: "Environment variable holding the password, never inline."},
			{name: "tls", value: l.boolVal(&v.TLS), doc: "Connect over TLS."},
			{name: "ca_file", value: caFile, doc: "PEM CA bundle verifying the server (needs tls: true); default the system roots."},
			{name: "timeout", def: "2s", value: l.durationVal(&v.Timeout, false), doc: "Per decision; past it the policy's on_store_error applies."},
			{name: "key_prefix", def: `"rl:"`, value: prefix, doc: "Prefix of every key; no { or } (the client id is the key's hash tag)."},
			{name: "sentinel_master", value: l.strVal(&v.SentinelMaster), doc: "When set, addrs are Sentinels and this is the master's name."},
			{name: "local_cache", def: "true", value: localCache, doc: "Cache over-limit answers locally until they expire; false sends every decision to Valkey."},
		},
		check: func(o object) {
			if o.bad && used() { // not a mapping: no addresses either
				l.errorf(o.missing(), o.field("addrs"), "%s", needAddrs)
			}
		},
	}
}

// caFile resolves a PEM CA bundle and checks that it holds a certificate.
func (l *loader) caFile(n *yaml.Node, path string) (string, bool) {
	f, ok := l.filePath(n, path, l.dir)
	if !ok {
		return "", false
	}
	pem, err := os.ReadFile(f)
	if err != nil {
		l.errorf(n, path, "%q: %v", n.Value, unwrapPathError(err))
		return "", false
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		l.errorf(n, path, "%q: no PEM certificate in it", n.Value)
		return "", false
	}
	return f, true
}

// realIPSection is `real_ip:` (nginx realip).
func (l *loader) realIPSection() *section {
	r := &l.c.RealIP
	choices := []string{"X-Forwarded-For", "X-Real-IP", "Forwarded"}
	header := value{func() schema { return enumShape(choices...) }, func(n *yaml.Node, path string) {
		s, _ := l.str(n, path)
		// Header names are case-insensitive (RFC 9110 §5.1).
		if i := slices.IndexFunc(choices, func(c string) bool { return strings.EqualFold(c, s) }); i >= 0 {
			r.Header = choices[i]
		} else {
			l.oneOf(n, path, choices...) // reports the mistake
		}
	}}
	return &section{
		fields: []field{
			{name: "header", def: "X-Forwarded-For", value: header, doc: "Header carrying the client address (any case); Forwarded is RFC 7239."},
			{name: "trusted_proxies", value: l.prefixesVal(&r.TrustedProxies), doc: "Addresses or CIDRs whose header is believed (nginx set_real_ip_from); none: the peer is the client."},
			{name: "recursive", value: l.boolVal(&r.Recursive), doc: "Skip trusted addresses from the right of the header (nginx real_ip_recursive)."},
		},
		check: func(o object) { l.warnRealIP(o, r) },
	}
}

// warnRealIP warns about real_ip settings that do not do what they seem to.
func (l *loader) warnRealIP(o object, r *RealIP) {
	if o.has("header") && len(r.TrustedProxies) == 0 {
		l.warnf(o.keys["header"], o.field("header"), "ignored: no trusted_proxies, so the peer address is always the client")
	}
	// A prefix covering every address (0.0.0.0/0, ::/0) trusts every
	// client's own header: each one picks its key and bypasses every ip limit.
	for _, p := range r.TrustedProxies {
		if p.Bits() == 0 {
			l.warnf(o.keys["trusted_proxies"], o.field("trusted_proxies"), "%v trusts every address: any client can set its own address with the header and escape ip-keyed limits", p)
		}
	}
}

// jwtSection is `jwt:`.
func (l *loader) jwtSection() *section {
	return &section{optional: true, fields: []field{
		// RFC 7518 §3.2: an HS256 key must be at least 256 bits.
		{name: "hmac_secret_env", value: l.secretVal(&l.c.JWT.HMACSecret, 32),
			doc: "Environment variable holding the HS256 key (at least 32 bytes); unset: tokens are read unverified."},
	}}
}

// responseSection is `response:`.
func (l *loader) responseSection() *section {
	r := &l.c.Response
	names := []string{"ratelimit", "ratelimit-legacy", "x-ratelimit"}
	headers := value{func() schema { return listShape(enumShape(names...), true) }, func(n *yaml.Node, path string) {
		items, vals, ok := l.strings(n, path, true)
		if !ok {
			return
		}
		r.Headers = 0
		for i := range vals {
			field := index(path, i)
			if s, ok := l.oneOf(items[i], field, names...); ok {
				bit := HeaderSet(1) << slices.Index(names, s)
				if r.Headers&bit != 0 {
					l.errorf(items[i], field, "%q: listed twice", s)
				}
				r.Headers |= bit
			}
		}
	}}
	return &section{fields: []field{
		{name: "status", def: "429", value: l.intVal(&r.Status, 400, 599), doc: "Status of a refusal."},
		{name: "headers", def: "[ratelimit]", value: headers,
			doc: "Header families: ratelimit (IETF draft RateLimit-Policy and RateLimit), ratelimit-legacy (RateLimit-Limit/-Remaining/-Reset), x-ratelimit (X-RateLimit-*, reset in epoch seconds)."},
		{name: "partition_key", def: "false", value: l.boolVal(&r.PartitionKey),
			doc: "Add the IETF draft's pk parameter (a hash of the client's state key, never the key) to RateLimit-Policy and RateLimit."},
		{name: "problem_types", def: "rlproxy", value: l.problemTypesVal(&r.ProblemTypes),
			doc: "Type URI of a refusal's problem details: rlproxy (urn:rlproxy:problem:rate-limited) or ietf (the draft's quota-exceeded)."},
	}}
}

// quotaSection is `quota_endpoint:`. It is decoded even when absent (its
// limit is the Config's default); topCheck turns it off then.
func (l *loader) quotaSection() *section {
	q := &l.c.QuotaEndpoint
	q.Limit.Kind = algo.TokenBucket
	path := value{pathShape, func(n *yaml.Node, p string) {
		if s, ok := l.str(n, p); ok && !strings.HasPrefix(s, "/") {
			l.errorf(n, p, "%q: must start with /", s)
		} else if ok {
			q.Path = s
		}
	}}
	ok := true // rate and burst valid, so the limit may be checked whole
	rate := value{rateShape, func(n *yaml.Node, p string) {
		c, per, good := l.rate(n, p)
		if ok = ok && good; good {
			q.Limit.Count, q.Limit.Period = c, per
		}
	}}
	burst := value{func() schema { return intShape(1, maxBurst) }, func(n *yaml.Node, p string) {
		b, good := l.integer(n, p, 1, maxBurst)
		if ok = ok && good; good {
			q.Limit.Burst = b
		}
	}}
	return &section{
		fields: []field{
			{name: "path", def: "/rate-limit", value: path, doc: "URL path answered."},
			{name: "rate", def: "10r/s", value: rate, doc: "Refill of the token bucket (per client IP) that protects the endpoint itself."},
			{name: "burst", def: "20", value: burst, doc: "Capacity of that token bucket, requests."},
		},
		check: func(o object) {
			if ok {
				l.limitValid(o.missing(), o.path, q.Limit)
			}
		},
	}
}

// upstream decodes one entry of `upstreams:`.
func (l *loader) upstream(e entry) *Upstream {
	u := &Upstream{Name: e.name}
	l.decode(e.val, join("upstreams", e.name), e.key.Line, l.upstreamSection(u))
	return u
}

// upstreamSection is one upstream: url or builtin (decoded first: ca_file
// depends on the URL).
func (l *loader) upstreamSection(u *Upstream) *section {
	caFile := value{stringShape, func(n *yaml.Node, path string) {
		if u.URL == nil || u.URL.Scheme != "https" {
			l.errorf(n, path, "needs an https:// url")
		} else {
			u.CAFile, _ = l.caFile(n, path)
		}
	}}
	return &section{
		fields: append([]field{
			{name: "url", value: checked(upstreamURLShape),
				doc: "http:// or https:// URL, no query or fragment; its path prefixes the request's."},
			{name: "builtin", value: checked(func() schema { return enumShape("echo") }), doc: "A built-in upstream instead of url: echo answers with the request it received."},
			{name: "ca_file", value: caFile, doc: "PEM CA bundle verifying an https upstream; default the system roots."},
			{name: "response_header_timeout", def: "30s", value: l.durationVal(&u.ResponseHeaderTimeout, false),
				doc: "Longest wait for the upstream's response headers; past it the client gets 504."},
			{name: "read_timeout", def: "60s", value: l.durationVal(&u.ReadTimeout, true),
				doc: "Longest wait between two reads of the upstream's response body (nginx proxy_read_timeout; 0 = none); past it the response is cut and the client connection closed. gRPC and event streams follow server.stream_idle_timeout."},
			{name: "adaptive_concurrency", sub: l.adaptiveSection(u),
				doc: "Present: the requests in flight to this upstream (per instance) are bounded by a limit that follows its latency; the rest wait by priority class, fairly across clients, or are shed with 503 overloaded."},
		}, slices.Concat(forwardingFields(), poolFields())...),
		// The pool before ca_file, which needs the servers' scheme.
		pre: func(o object) {
			l.upstreamTarget(o, u)
			l.pool(o, u)
		},
		check: func(o object) { l.upstreamFields(o, u) },
		extend: func(s schema) {
			s["type"] = "object"
			s["oneOf"] = []any{schema{"required": []any{"url"}}, schema{"required": []any{"builtin"}}, schema{"required": []any{"urls"}}}
		},
	}
}

// upstreamTarget decodes url or builtin, exactly one of them (or neither:
// urls, decoded by pool).
func (l *loader) upstreamTarget(o object, u *Upstream) {
	switch {
	case o.bad:
	case o.has("url") && o.has("builtin"):
		l.errorf(o.keys["builtin"], o.field("builtin"), "set url or builtin, not both")
	case o.has("url"):
		u.URL, _ = l.upstreamURL(o.get("url"), o.field("url"))
	case o.has("builtin"):
		u.Builtin, _ = l.oneOf(o.get("builtin"), o.field("builtin"), "echo")
	case !o.has("urls"):
		l.errorf(o.missing(), o.path, "want url (http:// or https://), urls or builtin: echo")
	}
}
