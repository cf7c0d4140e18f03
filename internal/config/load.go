package config

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/algo"
)

// builtinHashSecret keys the hash of credential-derived client ids when
// store.key_hash_secret_env is not set. It is public (it is in this source),
// so it only keeps credentials out of plain sight: operators should set
// their own secret (README.md, "Configuration reference").
const builtinHashSecret = "rlproxy built-in key-hash secret: set store.key_hash_secret_env"

// Load reads the config file at path and parses it with Parse. A file that
// cannot be read is an error wrapped with "reading config"; mistakes in the
// file are an *Errors.
func Load(path string) (*Config, error) { return LoadWith(path, LoadOptions{}) }

// Parse decodes and validates data, the contents of the config file at path
// (path names the file in messages and anchors relative file names: TLS
// files, CA files, plans keys_file, which Parse reads from disk, as it reads
// the environment variables the config names). It returns every problem
// found as an *Errors, sorted by file and line, or the Config.
func Parse(path string, data []byte) (*Config, error) { return parse(path, data, LoadOptions{}) }

func parse(path string, data []byte, opts LoadOptions) (*Config, error) {
	errs := &Errors{}
	l := &loader{
		decoder: &decoder{file: path, errs: errs},
		c:       defaults(path),
		dir:     filepath.Dir(path),
		digest:  sha256.New(),
		opts:    opts,
	}
	l.hash(data)
	if root, ok := l.document(data); ok {
		l.top(root)
	}
	if len(errs.Problems) > 0 {
		sortProblems(errs.Problems)
		return nil, errs
	}
	sortProblems(l.c.Warnings)
	l.digest.Sum(l.c.Digest[:0])
	return l.c, nil
}

// defaults is the Config of an empty file (CONFIG-SPEC defaults).
func defaults(path string) *Config {
	return &Config{
		Path:        path,
		Listen:      ":8080",
		AdminListen: "127.0.0.1:9090",
		Log:         Log{Level: slog.LevelInfo, Format: "text", RefusalsPerSecond: 10},
		Server: Server{
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			BodyTimeout:       60 * time.Second,
			MaxHeaderBytes:    1 << 20,
			ShutdownTimeout:   30 * time.Second,
			MaxWaiting:        10_000,
			MaxWait:           30 * time.Second,
		},
		Store: Store{
			Type:       "memory",
			MaxKeys:    1_000_000,
			Valkey:     Valkey{Timeout: 2 * time.Second, KeyPrefix: "rl:"},
			Breaker:    Breaker{Failures: 5, Cooldown: 500 * time.Millisecond},
			HashSecret: []byte(builtinHashSecret),
		},
		RealIP:        RealIP{Header: "X-Forwarded-For"},
		Response:      Response{Status: 429, Headers: HeadersRateLimit},
		QuotaEndpoint: QuotaEndpoint{Limit: algo.Limit{Kind: algo.TokenBucket, Count: 10, Period: 1000, Burst: 20}},
		Upstreams:     map[string]*Upstream{},
		Policies:      map[string]*Policy{},
		Plans:         map[string]*Plans{},
	}
}

// loader fills one Config from the config file (and the files it names).
type loader struct {
	*decoder
	c      *Config
	dir    string    // the config file's directory: relative paths start here
	digest hash.Hash // SHA-256 over the config file and each keys_file
	opts   LoadOptions
}

// hash adds one file's bytes to the digest, length first so that file
// boundaries count.
func (l *loader) hash(data []byte) {
	l.digest.Write(binary.BigEndian.AppendUint64(nil, uint64(len(data))))
	l.digest.Write(data)
}

// warnf records a warning: valid, but probably not what the operator wants.
func (l *loader) warnf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	l.c.Warnings = append(l.c.Warnings, Problem{File: l.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// document parses data as exactly one YAML document and returns its root
// (nil for an empty file); ok is false after a syntax error.
func (d *decoder) document(data []byte) (root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		d.syntax(err)
		return nil, false
	}
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.errorf(&extra, "", "a second YAML document (---) is not allowed: put everything in one")
		return nil, false
	case !errors.Is(err, io.EOF):
		d.syntax(err)
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// syntax records a YAML syntax error, taking the line out of yaml.v3's
// "yaml: line N: message" form.
func (d *decoder) syntax(err error) {
	// yaml.v3 v3.0.1 reports parser errors (unlike scanner errors) with a
	// 0-based line ((*parser).fail in decode.go); these are its parser
	// messages (parserc.go), whose line is one too small.
	parserMsgs := []string{"did not find expected ',' or '}'", "did not find expected ',' or ']'",
		"did not find expected key", "did not find expected '-' indicator",
		"did not find expected node content", "did not find expected <document start>",
		"found undefined tag handle", "found duplicate %YAML directive",
		"found incompatible YAML document", "found duplicate %TAG directive"}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, found := strings.CutPrefix(msg, "line "); found {
		if num, m, found := strings.Cut(rest, ": "); found {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, m
				if slices.Contains(parserMsgs, m) {
					line++
				}
			}
		}
	}
	d.errs.Problems = append(d.errs.Problems, Problem{File: d.file, Line: line, Msg: "YAML syntax: " + msg})
}

// top decodes the top-level mapping. Sections are decoded in dependency
// order (upstreams and policies before the routes and plans that name them),
// whatever their order in the file.
func (l *loader) top(root *yaml.Node) {
	line := 0
	if root != nil {
		line = root.Line
	}
	o := l.object(root, "", line, "listen", "admin_listen", "tls", "log", "server", "store",
		"real_ip", "jwt", "upstreams", "policies", "plans", "routes", "response", "quota_endpoint",
		"forward_auth", "envoy_rls", "admin")
	c := l.c
	if n := o.get("listen"); n != nil {
		if s, ok := l.hostPort(n, "listen"); ok {
			c.Listen = s
		}
	}
	if n := o.get("admin_listen"); n != nil {
		if s, ok := l.str(n, "admin_listen"); ok && s == "" {
			c.AdminListen = ""
		} else if ok {
			if s, ok := l.hostPort(n, "admin_listen"); ok {
				c.AdminListen = s
			}
		}
	}
	if c.AdminListen != "" && samePort(c.Listen, c.AdminListen) {
		l.errorf(o.keys["admin_listen"], "admin_listen", "%q: must not share the public listener %q (metrics and health stay off the public port)", c.AdminListen, c.Listen)
	}
	if n := o.get("tls"); n != nil {
		l.tls(l.object(n, "tls", o.keys["tls"].Line, "cert_file", "key_file"))
	}
	l.log(l.object(o.get("log"), "log", o.line, "level", "format", "refusals_per_second", "access"))
	l.server(l.object(o.get("server"), "server", o.line, "read_header_timeout", "idle_timeout",
		"body_timeout", "max_header_bytes", "shutdown_timeout", "max_waiting", "max_wait",
		"write_timeout", "max_connections", "shutdown_delay", "h2c", "stream_idle_timeout", "proxy_protocol"))
	l.store(l.object(o.get("store"), "store", keyLine(o, "store"), "type", "max_keys", "valkey", "breaker", "key_hash_secret_env"))
	l.realIP(l.object(o.get("real_ip"), "real_ip", o.line, "header", "trusted_proxies", "recursive"))
	if n := o.get("jwt"); n != nil {
		jo := l.object(n, "jwt", o.keys["jwt"].Line, "hmac_secret_env")
		if n := jo.get("hmac_secret_env"); n != nil {
			// RFC 7518 §3.2: an HS256 key must be at least 256 bits.
			if s, ok := l.secretEnv(n, jo.field("hmac_secret_env"), 32); ok {
				c.JWT.HMACSecret = []byte(s)
			}
		}
	}
	ro := l.object(o.get("response"), "response", o.line, "status", "headers", "partition_key", "problem_types")
	l.response(ro)
	l.responseIETF(ro) // response_ietf.go
	if n := o.get("quota_endpoint"); n != nil {
		l.quotaEndpoint(l.object(n, "quota_endpoint", o.keys["quota_endpoint"].Line, "path", "rate", "burst"))
	}
	for _, e := range l.entries(o.get("upstreams"), "upstreams") {
		c.Upstreams[e.name] = l.upstream(e)
	}
	for _, e := range l.entries(o.get("policies"), "policies") {
		c.Policies[e.name] = l.policy(e)
		c.PolicyOrder = append(c.PolicyOrder, e.name)
	}
	for _, e := range l.entries(o.get("plans"), "plans") {
		c.Plans[e.name] = l.plans(e)
	}
	l.routes(o)
	l.integrations(o)
	l.warnCredentials(o)
	l.admin(o)
}

// keyLine is the line of field name's key in o, or o's own line when absent.
func keyLine(o object, name string) int {
	if k := o.keys[name]; k != nil {
		return k.Line
	}
	return o.line
}

// samePort reports whether two listen addresses would collide: same port
// and the same host, or either host unspecified (all interfaces).
func samePort(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return pa == pb && pa != "0" && (ha == hb || wildcard(ha) || wildcard(hb))
}

// tls decodes `tls:` and loads the pair, so a bad certificate fails here
// (and on reload) rather than at the first handshake.
func (l *loader) tls(o object) {
	if o.bad {
		return
	}
	var t TLS
	var ok [2]bool
	for i, f := range []struct {
		name string
		dst  *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}} {
		if n := o.get(f.name); n != nil {
			*f.dst, ok[i] = l.filePath(n, o.field(f.name), l.dir)
		} else {
			l.errorf(o.missing(), o.field(f.name), "required: a PEM file")
		}
	}
	if !ok[0] || !ok[1] {
		return
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		l.errorf(o.missing(), o.path, "loading certificate and key: %v", err)
		return
	}
	l.c.TLS = &t
}

// log decodes `log:`.
func (l *loader) log(o object) {
	if n := o.get("level"); n != nil {
		if s, ok := l.oneOf(n, o.field("level"), "debug", "info", "warn", "error"); ok {
			_ = l.c.Log.Level.UnmarshalText([]byte(s)) // cannot fail: s is one of slog's names
		}
	}
	if n := o.get("format"); n != nil {
		if s, ok := l.oneOf(n, o.field("format"), "text", "json"); ok {
			l.c.Log.Format = s
		}
	}
	if n := o.get("refusals_per_second"); n != nil {
		if v, ok := l.integer(n, o.field("refusals_per_second"), 0, 1_000_000); ok {
			l.c.Log.RefusalsPerSecond = int(v)
		}
	}
	l.accessLog(o)
}

// server decodes `server:`.
func (l *loader) server(o object) {
	s := &l.c.Server
	for _, f := range []struct {
		name   string
		dst    *time.Duration
		zeroOK bool
	}{
		{"read_header_timeout", &s.ReadHeaderTimeout, false},
		{"idle_timeout", &s.IdleTimeout, false},
		{"body_timeout", &s.BodyTimeout, true},
		{"shutdown_timeout", &s.ShutdownTimeout, false},
		{"max_wait", &s.MaxWait, true},
	} {
		if n := o.get(f.name); n != nil {
			if v, ok := l.duration(n, o.field(f.name), f.zeroOK); ok {
				*f.dst = v
			}
		}
	}
	if n := o.get("max_header_bytes"); n != nil {
		if v, ok := l.integer(n, o.field("max_header_bytes"), 1024, 64<<20); ok {
			s.MaxHeaderBytes = int(v)
		}
	}
	if n := o.get("max_waiting"); n != nil {
		if v, ok := l.integer(n, o.field("max_waiting"), 0, 10_000_000); ok {
			s.MaxWaiting = int(v)
		}
	}
	l.serverLimits(o)
	l.serverProxy(o)
}

// store decodes `store:`. Valkey secrets are read only when the Valkey
// store is selected; the key-hash secret always (both stores hash).
func (l *loader) store(o object) {
	s := &l.c.Store
	if n := o.get("type"); n != nil {
		if v, ok := l.oneOf(n, o.field("type"), "memory", "valkey"); ok {
			s.Type = v
		}
	}
	if n := o.get("max_keys"); n != nil {
		if v, ok := l.integer(n, o.field("max_keys"), 1, 1_000_000_000); ok {
			s.MaxKeys = int(v)
		}
	}
	if n := o.get("key_hash_secret_env"); n != nil {
		if v, ok := l.secretEnv(n, o.field("key_hash_secret_env"), 16); ok {
			s.HashSecret = []byte(v)
		}
	}
	bo := l.object(o.get("breaker"), o.field("breaker"), keyLine(o, "breaker"), "failures", "cooldown",
		"failure_ratio", "window", "min_calls")
	l.breakerRatio(bo)
	if n := bo.get("failures"); n != nil {
		if v, ok := l.integer(n, bo.field("failures"), 1, 1_000_000); ok {
			s.Breaker.Failures = int(v)
		}
	}
	if n := bo.get("cooldown"); n != nil {
		if v, ok := l.duration(n, bo.field("cooldown"), false); ok {
			s.Breaker.Cooldown = v
		}
	}
	l.valkey(l.object(o.get("valkey"), o.field("valkey"), keyLine(o, "valkey"), "addrs", "username",
		"password_env", "tls", "ca_file", "timeout", "key_prefix", "sentinel_master", "local_cache"), s.Type == "valkey")
}

// valkey decodes `store.valkey:`; used says the Valkey store is selected
// (addresses required, password read).
func (l *loader) valkey(o object, used bool) {
	v := &l.c.Store.Valkey
	if n := o.get("addrs"); n != nil {
		items, addrs, ok := l.strings(n, o.field("addrs"), true)
		for i, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				l.errorf(items[i], index(o.field("addrs"), i), "%q: want HOST:PORT", a)
				ok = false
			}
		}
		if ok {
			v.Addrs = addrs
		}
	}
	if used && len(v.Addrs) == 0 && (!o.has("addrs") || isNull(o.get("addrs")) || len(o.get("addrs").Content) == 0) {
		at := o.get("addrs")
		if at == nil {
			at = o.missing()
		}
		l.errorf(at, o.field("addrs"), "required with store type valkey: one address, or several seeds of a cluster")
	}
	if n := o.get("username"); n != nil {
		v.Username, _ = l.str(n, o.field("username"))
	}
	if n := o.get("password_env"); n != nil && used {
		v.Password, _ = l.secretEnv(n, o.field("password_env"), 1)
	}
	if n := o.get("tls"); n != nil {
		v.TLS, _ = l.boolean(n, o.field("tls"))
	}
	if n := o.get("ca_file"); n != nil {
		if !v.TLS {
			l.errorf(n, o.field("ca_file"), "needs tls: true")
		} else {
			v.CAFile, _ = l.caFile(n, o.field("ca_file"))
		}
	}
	if n := o.get("timeout"); n != nil {
		if d, ok := l.duration(n, o.field("timeout"), false); ok {
			v.Timeout = d
		}
	}
	if n := o.get("key_prefix"); n != nil {
		if s, ok := l.str(n, o.field("key_prefix")); ok && strings.ContainsAny(s, "{}") {
			l.errorf(n, o.field("key_prefix"), "%q: must not contain { or } (the client id is the key's Cluster hash tag)", s)
		} else if ok {
			v.KeyPrefix = s
		}
	}
	if n := o.get("sentinel_master"); n != nil {
		v.SentinelMaster, _ = l.str(n, o.field("sentinel_master"))
	}
	if n := o.get("local_cache"); n != nil {
		if b, ok := l.boolean(n, o.field("local_cache")); ok {
			v.DisableLocalCache = !b
		}
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

// realIP decodes `real_ip:` (nginx realip).
func (l *loader) realIP(o object) {
	r := &l.c.RealIP
	if n := o.get("header"); n != nil {
		choices := []string{"X-Forwarded-For", "X-Real-IP", "Forwarded"}
		s, _ := l.str(n, o.field("header"))
		// Header names are case-insensitive (RFC 9110 §5.1).
		if i := slices.IndexFunc(choices, func(c string) bool { return strings.EqualFold(c, s) }); i >= 0 {
			r.Header = choices[i]
		} else {
			l.oneOf(n, o.field("header"), choices...) // reports the mistake
		}
	}
	if n := o.get("trusted_proxies"); n != nil {
		r.TrustedProxies, _ = l.prefixes(n, o.field("trusted_proxies"))
	}
	if n := o.get("recursive"); n != nil {
		r.Recursive, _ = l.boolean(n, o.field("recursive"))
	}
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

// response decodes `response:`.
func (l *loader) response(o object) {
	r := &l.c.Response
	if n := o.get("status"); n != nil {
		if v, ok := l.integer(n, o.field("status"), 400, 599); ok {
			r.Status = int(v)
		}
	}
	n := o.get("headers")
	if n == nil {
		return
	}
	names := []string{"ratelimit", "ratelimit-legacy", "x-ratelimit"}
	items, vals, ok := l.strings(n, o.field("headers"), true)
	if !ok {
		return
	}
	r.Headers = 0
	for i := range vals {
		field := index(o.field("headers"), i)
		if s, ok := l.oneOf(items[i], field, names...); ok {
			bit := HeaderSet(1) << slices.Index(names, s)
			if r.Headers&bit != 0 {
				l.errorf(items[i], field, "%q: listed twice", s)
			}
			r.Headers |= bit
		}
	}
}

// quotaEndpoint decodes `quota_endpoint:`; present means enabled.
func (l *loader) quotaEndpoint(o object) {
	q := &l.c.QuotaEndpoint
	q.Path = "/rate-limit"
	if n := o.get("path"); n != nil {
		if s, ok := l.str(n, o.field("path")); ok && !strings.HasPrefix(s, "/") {
			l.errorf(n, o.field("path"), "%q: must start with /", s)
		} else if ok {
			q.Path = s
		}
	}
	if lim, ok := l.bucket(o, "token_bucket", q.Limit); ok && l.limitValid(o.missing(), o.path, lim) {
		q.Limit = lim
	}
}

// upstream decodes one entry of `upstreams:`.
func (l *loader) upstream(e entry) *Upstream {
	path := join("upstreams", e.name)
	u := &Upstream{Name: e.name, ResponseHeaderTimeout: 30 * time.Second}
	o := l.object(e.val, path, e.key.Line, upstreamFields()...)
	switch {
	case o.bad:
	case o.has("url") && o.has("builtin"):
		l.errorf(o.keys["builtin"], o.field("builtin"), "set url or builtin, not both")
	case o.has("url"):
		u.URL, _ = l.upstreamURL(o.get("url"), o.field("url"))
	case o.has("builtin"):
		u.Builtin, _ = l.oneOf(o.get("builtin"), o.field("builtin"), "echo")
	case !o.has("urls"):
		l.errorf(o.missing(), path, "want url (http:// or https://), urls or builtin: echo")
	}
	l.pool(o, u)
	if n := o.get("ca_file"); n != nil {
		if u.URL == nil || u.URL.Scheme != "https" {
			l.errorf(n, o.field("ca_file"), "needs an https:// url")
		} else {
			u.CAFile, _ = l.caFile(n, o.field("ca_file"))
		}
	}
	if n := o.get("response_header_timeout"); n != nil {
		if v, ok := l.duration(n, o.field("response_header_timeout"), false); ok {
			u.ResponseHeaderTimeout = v
		}
	}
	l.upstreamFields(o, u)
	return u
}
