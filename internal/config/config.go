// Package config turns an rlproxy YAML file into a validated, typed Config.
//
// The file format is the contract in docs/CONTRACT.md (mirrored in the operator's
// reference, docs/reference/config.md). Decoding uses yaml.v3 with unknown fields refused; every
// problem is reported as "FILE:LINE: field: message", like `nginx -t`. A
// Config belongs to its loader's caller until it is shared; from then on it
// is immutable, and a reload builds a new one and swaps it. The owner's one
// change is ReleaseKeys, before sharing it.
package config

import (
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"time"

	"rlproxy/internal/algo"
)

// Config is one loaded, validated configuration file.
type Config struct {
	// Path is the file it was read from; Digest is the SHA-256 of its bytes
	// (plus any referenced plan key files), so identical content is not a reload.
	Path   string
	Digest [32]byte

	// Listen is the public listener address (default ":8080").
	Listen string `restart:"listen"`
	// AdminListen serves /metrics, /healthz, /readyz (default
	// "127.0.0.1:9090"; "" disables it).
	AdminListen string `restart:"admin_listen"`
	// ListenSource and AdminListenSource say where Listen and AdminListen
	// came from, for `rlproxy validate`: an Override's Source ("flag
	// -listen", "environment RLPROXY_LISTEN"), "file FILE:LINE" or "default".
	ListenSource, AdminListenSource string
	// TLS, when non-nil, serves Listen over HTTPS with this certificate;
	// turning it on or off takes a restart, its files reload.
	TLS *TLS `restart:"tls,onoff"`

	Log      Log
	Server   Server
	Store    Store
	RealIP   RealIP
	JWT      JWT
	Response Response
	// QuotaEndpoint, when Path is non-empty, answers GET Path with the
	// caller's quota as JSON without spending it.
	QuotaEndpoint QuotaEndpoint

	// Upstreams by name.
	Upstreams map[string]*Upstream
	// Policies by name, and PolicyOrder their names in file order.
	Policies    map[string]*Policy
	PolicyOrder []string
	// Plans by name: key → plan → policies.
	Plans map[string]*Plans
	// Routes in file order; the first match wins.
	Routes []*Route

	// Warnings are valid settings that are probably mistakes (a real_ip
	// header with no trusted proxies, unverified JWT claims, the built-in
	// key-hash secret); `rlproxy validate` prints them, serving logs them.
	Warnings []Problem

	// ForwardAuth is the forward-auth decision listener (off by default).
	ForwardAuth ForwardAuth
	// EnvoyRLS is the Envoy rate limit service listener (off by default).
	EnvoyRLS EnvoyRLS
	// Admin configures the admin page on admin_listen.
	Admin Admin
	// Tracing, when non-nil, exports OpenTelemetry traces (tracing.go);
	// nil (the section absent) is off.
	Tracing *Tracing `restart:"tracing"`
}

// TLS is a certificate and key pair (PEM files, paths resolved against the
// config file's directory), read at load time and on every reload.
type TLS struct {
	CertFile string
	KeyFile  string
	// ClientCA is a PEM bundle of the CAs client certificates must chain
	// to ("" = none); read with the certificate, and reloaded with it.
	ClientCA string
	// ClientCRL is a certificate revocation list (PEM or DER) signed by a
	// CA of ClientCA: a client certificate it lists is refused ("" = none).
	ClientCRL string
	// ClientAuth is whether a client certificate is asked for: ClientAuthNone,
	// ClientAuthRequest or ClientAuthRequire.
	ClientAuth string
	// ClientHeaders sends the verified client certificate's subject and
	// fingerprint to the upstream (the client's own copies removed first).
	ClientHeaders bool
	// ACME, when non-nil, obtains and renews certificates for its names;
	// CertFile and KeyFile ("" with ACME alone) serve the other names.
	ACME *ACME `restart:"tls.acme"`
}

// tls.client_auth values: none asks for no certificate; request verifies
// one if the client gives one (a handshake with a certificate that does not
// verify fails) and lets a client without one in; require refuses a
// handshake without a verified certificate (nginx ssl_verify_client
// off | optional | on).
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
)

// Log configures log/slog output on stderr.
type Log struct {
	Level  slog.Level // default info
	Format string     `restart:"log.format"` // "text" (default) or "json"
	// RefusalsPerSecond caps refusal log lines per second per instance
	// (default 10); the rest are counted, not logged.
	RefusalsPerSecond int
	// Access is the access log (accesslog.go).
	Access AccessLog
}

// AccessLog is `log.access`: one line per request.
type AccessLog struct {
	Enabled bool
	Format  string // "json" (default) or "combined"
	Path    string // "" = stderr; a file is reopened on SIGUSR1
	// Buffer is how many lines may wait for the writer (default 4096);
	// beyond it lines are dropped and counted, never waited for.
	Buffer int
}

// Server holds listener timeouts and the shaping caps.
type Server struct {
	ReadHeaderTimeout time.Duration `restart:"server.read_header_timeout"` // default 10s
	IdleTimeout       time.Duration `restart:"server.idle_timeout"`        // default 120s
	// BodyTimeout is the longest a client may leave between two reads of
	// its request body (nginx client_body_timeout, default 60s; 0 = none):
	// a trickled body cannot hold a connection for ever.
	BodyTimeout time.Duration
	// MaxBodySize is the largest request body, bytes, of a route that sets
	// none (nginx client_max_body_size; 0 = no limit, the default).
	MaxBodySize     int64
	MaxHeaderBytes  int           `restart:"server.max_header_bytes"` // bytes, default 1 MiB
	ShutdownTimeout time.Duration // default 30s: in-flight and waiting requests get this long
	// MaxWaiting caps requests held in leaky-bucket delay per instance
	// (default 10000); beyond it a request that would wait is refused.
	MaxWaiting int
	// MaxWait caps one request's delay (default 30s); a longer wait is refused.
	MaxWait time.Duration
	// PriorityClasses rank requests at an adaptive upstream, highest
	// first (none: one class, DefaultPriorityClass).
	PriorityClasses []PriorityClass
	// PriorityHeader names the request header a trusted proxy sets to a
	// request's priority class ("" = none), canonical form.
	PriorityHeader string
	// WriteTimeout is the longest one write to a client may block (nginx
	// send_timeout, default 60s; 0 = none): a client that stops reading
	// is cut, one that reads slowly but steadily is not.
	WriteTimeout time.Duration
	// MaxConnections caps open client connections per listener; beyond it a
	// new connection is closed at once. 0 (the default) derives the cap from
	// the process's open-file limit, leaving room for upstream and store
	// connections (internal/server, limits.go).
	MaxConnections int
	// MaxConnectionsPerClient caps the open connections of one client
	// address (an IPv6 address's /64), read after a PROXY protocol header;
	// beyond it a new connection is closed at once. nil (the default)
	// derives it from MaxConnections (internal/server, limits_conns.go);
	// 0 turns it off.
	MaxConnectionsPerClient *int
	// ShutdownDelay is how long the listener keeps accepting after SIGTERM
	// while /readyz answers 503, so load balancers stop sending first
	// (default 5s; 0 = close at once).
	ShutdownDelay time.Duration

	// H2C accepts HTTP/2 with prior knowledge on a plain listener, next
	// to HTTP/1.1 (default false; server_proxy.go).
	H2C bool `restart:"server.h2c"`
	// StreamIdleTimeout is the longest a gRPC client may leave between
	// two messages of its stream (0 = none, the default); body_timeout
	// does not apply to gRPC requests, whose streams may rightly be quiet.
	StreamIdleTimeout time.Duration
	// ProxyProtocol, when set, reads PROXY protocol v1/v2 headers from
	// trusted peers on the public listener.
	ProxyProtocol *ProxyProtocol `restart:"server.proxy_protocol"`
	// Engine is what serves the public listener's HTTP/1.x connections:
	// EngineAuto (the default; internal/h1, with HTTP/2, h2c and what it
	// hands over on net/http) or EngineStd (net/http alone).
	Engine string `restart:"server.engine"`
}

// server.engine's values.
const (
	EngineAuto = "auto"
	EngineStd  = "std"
)

// ProxyProtocol is `server.proxy_protocol`.
type ProxyProtocol struct {
	// Trusted are the peers whose PROXY header is read; a connection from
	// any other peer that starts with one is closed.
	Trusted []netip.Prefix
	// Required (default true) closes a trusted peer's connection that
	// does not start with a PROXY header.
	Required bool
}

// Store selects and configures where limiter state lives.
type Store struct {
	Type    string // "memory" (default) or "valkey"
	MaxKeys int    // memory: LRU bound on tracked keys (default 1,000,000)
	Valkey  Valkey
	// Breaker is the circuit breaker in front of the Valkey store.
	Breaker Breaker
	// HashSecret keys the hash of credential-derived client ids (API keys,
	// cookies, tokens); read from the environment variable named by
	// key_hash_secret_env. All instances sharing a store need the same one.
	HashSecret []byte
}

// Valkey configures the shared store (a node, or seeds of a Valkey Cluster).
type Valkey struct {
	Addrs          []string
	Username       string
	Password       string // resolved from password_env, never inline
	TLS            bool
	CAFile         string
	Timeout        time.Duration // per round trip from its send, default 2s (docs/reference/config.md: why)
	KeyPrefix      string        // default "rl:"
	SentinelMaster string        // when set, Addrs are Sentinels
	// DisableLocalCache is `local_cache: false` (default true): no local
	// over-limit cache in front of the store, every decision goes to
	// Valkey (for comparisons and debugging).
	DisableLocalCache bool
}

// Breaker opens after Failures consecutive failed store round trips (a
// batch of decisions is one) and skips the store for Cooldown, applying
// each policy's fail mode at once, then probes.
type Breaker struct {
	Failures int           // default 5
	Cooldown time.Duration // default 500ms
	// FailureRatio also opens it: that share of failed round trips over
	// the last Window, once there were MinCalls (default 0.5, 10s, 20).
	FailureRatio float64
	Window       time.Duration
	MinCalls     int
}

// RealIP is nginx realip: set_real_ip_from, real_ip_header, real_ip_recursive.
type RealIP struct {
	Header         string // "X-Forwarded-For" (default), "X-Real-IP" or "Forwarded"
	TrustedProxies []netip.Prefix
	Recursive      bool
}

// JWT configures the jwt:CLAIM key source. With no secret the token's
// signature is NOT verified: the claim is only as good as the client's word.
type JWT struct {
	HMACSecret []byte // HS256 key from hmac_secret_env; nil = unverified
}

// HeaderSet is a bit set of response header families.
type HeaderSet uint8

// Header families, docs/CONTRACT.md `response.headers`.
const (
	HeadersRateLimit       HeaderSet = 1 << iota // IETF draft RateLimit-Policy + RateLimit
	HeadersRateLimitLegacy                       // RateLimit-Limit/-Remaining/-Reset
	HeadersXRateLimit                            // X-RateLimit-Limit/-Remaining/-Reset (reset = epoch s)
)

// Response shapes refusals.
type Response struct {
	Status  int // 400..599, default 429
	Headers HeaderSet
	// PartitionKey adds the IETF draft's pk parameter (a hash of the
	// client's state key, never the key) to RateLimit-Policy and
	// RateLimit; default false (response_ietf.go).
	PartitionKey bool
	// ProblemTypes names the type of a refusal's problem details:
	// ProblemTypesRLProxy (default) or ProblemTypesIETF.
	ProblemTypes ProblemTypes
}

// QuotaEndpoint is the read-only quota status endpoint.
type QuotaEndpoint struct {
	Path string // e.g. "/rate-limit"; "" disables
	// Limit protects the endpoint itself (default token bucket 10r/s burst 20 per client IP).
	Limit algo.Limit
}

// Upstream is where a route's requests go.
type Upstream struct {
	Name    string
	URL     *url.URL // nil when Builtin is set
	Builtin string   // "echo"
	// CAFile verifies an https upstream (PEM); empty uses the system roots.
	CAFile                string
	ResponseHeaderTimeout time.Duration // default 30s
	// ReadTimeout is the longest wait between two reads of the upstream's
	// response body after its head (nginx proxy_read_timeout, default
	// 60s; 0 = none). On expiry the response, already started, is cut:
	// the client connection is closed. gRPC and text/event-stream
	// responses follow server.stream_idle_timeout instead.
	ReadTimeout time.Duration

	// Host is the Host header sent upstream: "" (`host: client`, the
	// default: the client's), HostUpstream (the server URL's host[:port],
	// nginx's default) or a literal host[:port] (upstream_fields.go).
	Host string
	// TLSServerName is the SNI name and the name the certificate must
	// carry for an https upstream; "" = the URL's host.
	TLSServerName string
	// Protocol is what an http:// upstream is spoken to in: "" (`protocol:
	// http1`, the default) or ProtocolH2C (HTTP/2 with prior knowledge).
	Protocol string
	// RequestHeaders edit the request sent upstream; ResponseHeaders the
	// upstream's response before the client gets it.
	RequestHeaders, ResponseHeaders HeaderRules
	// Servers is the pool (pools.go): `url` is a one-server pool, `urls`
	// lists several; nil when Builtin is set. URL is Servers[0].URL.
	Servers []UpstreamServer
	// Balance picks a server: BalanceRoundRobin (default, smooth weighted
	// as nginx), BalanceLeastConn or BalanceClientHash.
	Balance string
	// HashKey is client_hash's key (a key source as in policies; default ip).
	HashKey KeySpec
	// MaxFails failures within FailTimeout take a server out of rotation
	// for FailTimeout (nginx max_fails, default 1; 0 = never). A pool of
	// one server is never taken out by passive health (nginx neither).
	MaxFails    int
	FailTimeout time.Duration // default 10s
	// FailStatuses are response statuses that also count as failures
	// (none by default).
	FailStatuses []int
	// HealthCheck, when non-nil, probes every server in the background.
	HealthCheck *HealthCheck
	// Retries is how many other servers a request that could not be sent
	// may go to (nginx proxy_next_upstream_tries - 1; default 1).
	Retries int
	// RetryTimeout bounds the time spent retrying (0 = no bound).
	RetryTimeout time.Duration
	// Adaptive, when non-nil, bounds the requests in flight to the
	// upstream by a latency-driven limit (overload.go).
	Adaptive *AdaptiveConcurrency
}

// UpstreamServer is one server of a pool.
type UpstreamServer struct {
	URL    *url.URL
	Weight int // 1..1000, default 1
}

// HealthCheck is an active health check (pools.go).
type HealthCheck struct {
	Path         string        // GET path, default "/"
	Interval     time.Duration // default 5s
	Timeout      time.Duration // default 2s
	ExpectStatus int           // 0 (default) = any 2xx or 3xx
	Fails        int           // consecutive failures that mark a server down, default 2
	Passes       int           // consecutive successes that mark it up, default 2
}

// Values of Upstream.Host and Upstream.Protocol other than a literal host.
const (
	HostClient    = "client"
	HostUpstream  = "upstream"
	ProtocolHTTP1 = "http1"
	ProtocolH2C   = "h2c"
)

// HeaderRules are one direction's header edits of an upstream: Remove
// first, then Set (each replaces every value of its name).
type HeaderRules struct {
	Set    []HeaderValue
	Remove []string // canonical names
}

// HeaderValue is one header an upstream's rules set. A value read from
// the environment (set_env) is a secret: Secret marks it, String hides it.
type HeaderValue struct {
	Name   string // canonical (textproto.CanonicalMIMEHeaderKey)
	Value  string
	Secret bool
}

// String is the header as a log line may show it: a secret's value hidden.
func (h HeaderValue) String() string {
	if h.Secret {
		return h.Name + ": [set_env]"
	}
	return h.Name + ": " + h.Value
}

// Empty reports whether r edits nothing.
func (r HeaderRules) Empty() bool { return len(r.Set) == 0 && len(r.Remove) == 0 }

// FailMode is what a policy does when the store cannot decide.
type FailMode uint8

// Fail modes, docs/CONTRACT.md `on_store_error`.
const (
	FailOpen   FailMode = iota // allow (default), down to the Fallback floor
	FailClosed                 // deny: 503 problem+json
)

// SourceKind names where a client id comes from.
type SourceKind uint8

// Key sources, docs/CONTRACT.md "Key sources".
const (
	SourceIP SourceKind = iota + 1
	SourceHeader
	SourceQuery
	SourceCookie
	SourceJWT // a claim of a bearer token
	SourceGlobal
	// SourceTLS is a field of the client's verified TLS certificate;
	// Name is one of TLSFields.
	SourceTLS
)

// TLSFields are the certificate fields a tls:FIELD key source reads:
// spki (SHA-256 of the public key), subject (RFC 4514 string), and the
// first subject alternative name of a type.
var TLSFields = []string{"spki", "subject", "san:dns", "san:uri", "san:email"}

// Source is one key source; Name is the header (canonical form, as
// textproto.CanonicalMIMEHeaderKey), query parameter, cookie or claim name
// (empty for ip and global).
type Source struct {
	Kind SourceKind
	Name string
}

// KeySpec says how a policy identifies a client.
type KeySpec struct {
	// Sources in order: the first present and non-empty wins, or, when
	// Combine is set, all of them form one tuple. All missing → ip.
	Sources []Source
	Combine bool
	// IPv4Prefix and IPv6Prefix group addresses for ip keys (default 32, 128).
	IPv4Prefix int
	IPv6Prefix int
}

// Policy is one named limit.
type Policy struct {
	Name         string
	Line         int // line of its definition, for messages
	Limit        algo.Limit
	Key          KeySpec
	OnStoreError FailMode
	// Fallback is the per-instance in-memory floor used while failing open;
	// nil means allow everything while the store is down.
	Fallback *algo.Limit
	// DryRun (nginx limit_req_dry_run): would-be refusals pass and are counted.
	DryRun bool
	// Exempt clients (by real IP) pass and are not counted.
	Exempt []netip.Prefix
	// CountStatus, when not nil, limits the charge to requests whose
	// response status is in it (count_status, settle.go); nil counts all.
	CountStatus *StatusSet
	// Allotment, when not nil, lets an instance decide the policy's hot
	// keys from slices of their allowance (allotment:); nil decides every
	// request in the store.
	Allotment *Allotment
}

// Plans maps a credential to a named plan, each plan a list of policies.
type Plans struct {
	Name string
	// Key is where the credential comes from (e.g. header:X-API-Key).
	Key KeySpec
	// Keys maps credential → plan name (inline keys, then KeysFile's);
	// nil once released (ReleaseKeys).
	Keys *Credentials
	// KeysFile is the keys_file path resolved against the config file's
	// directory ("" when none); its bytes are part of Config.Digest.
	KeysFile string
	// Default is the plan for unknown or missing credentials; its policies
	// are keyed by their own key spec (ip unless set), so invented keys gain nothing.
	Default string
	// Plans maps plan name → policy names, checked together.
	Plans map[string][]string
	// Priority maps plan name → priority class (nil: none set).
	Priority map[string]string
}

// ReleaseKeys drops every plans section's credentials (Plans.Keys, and
// with them a flat keys_file's bytes, which they are substrings of): once
// package policy has compiled them into its index of hashed ids nothing
// reads them, and a serving process keeps one copy of a million
// credentials, not two. A Config cannot be compiled again after it. It is
// the one change to a loaded Config, and only its owner makes it, before
// sharing it (package server, while building a generation and before
// serving it).
func (c *Config) ReleaseKeys() {
	for _, p := range c.Plans {
		p.Keys = nil
	}
}

// Route maps matching requests to an upstream and policies.
type Route struct {
	Name     string
	Match    Match
	Upstream string
	Policies []string
	Plan     string // name in Config.Plans, or ""
	Cost     int64  // requests charged per request, default 1
	// CostResponseHeader, when set, names the response header (or
	// trailer) whose whole-number value is the request's real cost
	// (cost_response_header, settle.go); canonical form.
	CostResponseHeader string
	// MaxBodySize is the largest request body, bytes (nginx
	// client_max_body_size; 0 = no limit); server.max_body_size when the
	// route sets none.
	MaxBodySize int64
	// LimitRate caps each response's body at this many bytes per second
	// after its first LimitRateAfter bytes (nginx limit_rate and
	// limit_rate_after); 0 = no cap.
	LimitRate      int64
	LimitRateAfter int64
	// Upgrades are the protocols a request may upgrade to (RFC 9110 §7.8),
	// lower case, each "name" (any version) or "name/version"; an Upgrade
	// naming none of them is dropped as hop-by-hop (nginx's default), so
	// the upstream never switches. Default [websocket]; empty: none.
	Upgrades []string
	// StripPrefix is removed from the front of the path before it is
	// forwarded ("" = none); Rewrite replaces RewriteCut instead, as
	// nginx proxy_pass with a URI ("" = none). At most one is set.
	StripPrefix, Rewrite string
	// Priority is the priority class of the route's requests ("" = the lowest).
	Priority string
}

// Match selects requests; every set field must match.
type Match struct {
	Host       string // exact, case-insensitive, port ignored; "*.example.com": any name below example.com
	Path       string // exact
	PathPrefix string
	PathRegex  *regexp.Regexp
	Methods    []string // upper case; empty = any
}

// ForwardAuth is `forward_auth:`: a listener that decides requests other
// proxies describe (nginx auth_request, Traefik ForwardAuth, Caddy
// forward_auth) and answers 200 or the refusal, forwarding nothing.
type ForwardAuth struct {
	// Listen is its address ("" = off, the default); never the public one.
	Listen string `restart:"forward_auth.listen"`
	// RefusedStatus is the status of a refusal (0 = response.status): 403
	// for callers that pass only 2xx, 401 and 403 on (nginx auth_request).
	RefusedStatus int
}

// EnvoyRLS is `envoy_rls:`: a gRPC listener serving Envoy's
// envoy.service.ratelimit.v3.RateLimitService, its descriptors mapped to
// policies by Mappings.
type EnvoyRLS struct {
	// Listen is its address ("" = off, the default).
	Listen string `restart:"envoy_rls.listen"`
	// Mappings in file order; a descriptor takes the first that matches.
	Mappings []*RLSMapping
}

// RLSMapping maps the descriptors of one domain with one shape (keys in
// order, some values fixed) to policies. The descriptor's other values are
// the client id: each distinct tuple has its own state in every policy.
type RLSMapping struct {
	// Name labels the mapping in metrics (`route`) and logs.
	Name string
	// Domain is the RateLimitRequest domain it serves.
	Domain string
	// Entries is the descriptor's shape: same keys, same order, same length.
	Entries []RLSEntry
	// Policies decide each matching descriptor, atomically with the
	// request's other descriptors.
	Policies []string
}

// RLSEntry is one descriptor entry of a mapping: Key must match, and Value
// too when HasValue (otherwise any value, which becomes part of the key).
type RLSEntry struct {
	Key      string
	Value    string
	HasValue bool
}
