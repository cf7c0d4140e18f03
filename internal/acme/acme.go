// Package acme obtains and renews the public listener's certificates from
// an ACME CA (RFC 8555) with Caddy's certmagic: HTTP-01 on a plain
// listener that otherwise redirects to HTTPS, TLS-ALPN-01 (RFC 8737) in
// the public listener's handshakes, storage in a directory or, for a
// fleet, in Valkey (ValkeyStorage), and a certificate expiry metric.
// Certificates are obtained in the background: a CA that refuses is
// logged with its problem and retried with certmagic's backoff, and never
// stops a listener. Wildcard names (DNS-01) are not supported.
package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valkey-io/valkey-go"

	"rlproxy/internal/config"
	"rlproxy/internal/logging"
	"rlproxy/internal/tlsutil"
)

// Options are what a Manager needs besides tls.acme.
type Options struct {
	// Log receives certmagic's log (obtaining, renewing, the CA's errors).
	Log *slog.Logger
	// Registerer takes the expiry collector; nil registers nothing.
	Registerer prometheus.Registerer
	// Valkey is store.valkey, used with storage: valkey.
	Valkey config.Valkey
	// PublicAddr is the public (TLS) listener's address: where TLS-ALPN-01
	// is answered and where http_listen redirects.
	PublicAddr string
	// Static returns the certificate of tls.cert_file (nil without): it
	// serves names ACME does not cover.
	Static func() *tls.Certificate
	// RenewCheckInterval is how often certificates are checked for
	// renewal (0 = certmagic's 10 minutes); tests shorten it.
	RenewCheckInterval time.Duration
}

// Manager serves and maintains the certificates of tls.acme. Its methods
// are safe for concurrent use.
type Manager struct {
	cfg    *config.ACME
	opts   Options
	cache  *certmagic.Cache
	magic  *certmagic.Config
	issuer *certmagic.ACMEIssuer
	vs     *ValkeyStorage // nil unless storage is valkey
	names  map[string]bool

	challenge *tls.Config             // the config of TLS-ALPN-01 handshakes
	derived   atomic.Pointer[derived] // the last base config and its ACME twin

	cancel    context.CancelFunc // set by Start; stops managing and retries
	hs        *http.Server       // http_listen; nil without
	httpLn    net.Listener
	closeOnce sync.Once
}

// derived pairs a load's tls.Config with its copy serving ACME's
// certificates, so a handshake builds nothing.
type derived struct {
	base, conf *tls.Config
}

// New builds the certmagic configuration of c: its storage (the directory
// is created 0700), its ACME issuer with the enabled challenges, and the
// expiry collector. Nothing is obtained before Start. Errors: the storage
// directory or ca_root cannot be read, or the collector is registered
// twice.
func New(c *config.ACME, opts Options) (*Manager, error) {
	m := &Manager{cfg: c, opts: opts, names: map[string]bool{}}
	for _, d := range c.Domains {
		m.names[d] = true
	}
	storage, err := m.storage()
	if err != nil {
		return nil, err
	}
	logger := zapToSlog(opts.Log)
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		RenewCheckInterval: opts.RenewCheckInterval,
		Logger:             logger,
	})
	m.magic = certmagic.New(m.cache, certmagic.Config{Storage: storage, Logger: logger})
	if c.OnDemand {
		m.magic.OnDemand = &certmagic.OnDemandConfig{DecisionFunc: m.allowed}
	}
	if m.issuer, err = m.newIssuer(); err != nil {
		m.Close()
		return nil, err
	}
	m.magic.Issuers = []certmagic.Issuer{m.issuer}
	m.challenge = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.magic.GetCertificate, NextProtos: []string{acmez.ACMETLS1Protocol}}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(&expiryCollector{m: m}); err != nil {
			m.Close()
			return nil, fmt.Errorf("acme: registering the expiry metric: %w", err)
		}
	}
	return m, nil
}

// storage is the directory of tls.acme.storage (made 0700: certmagic
// writes its files 0600), or ValkeyStorage on store.valkey.
func (m *Manager) storage() (certmagic.Storage, error) {
	if m.cfg.Storage != config.StorageValkey {
		if err := os.MkdirAll(m.cfg.Storage, 0o700); err != nil {
			return nil, fmt.Errorf("acme: storage directory: %w", err)
		}
		return &certmagic.FileStorage{Path: m.cfg.Storage}, nil
	}
	v := m.opts.Valkey
	opt := valkey.ClientOption{
		InitAddress: v.Addrs, Username: v.Username, Password: v.Password,
		Sentinel:     valkey.SentinelOption{MasterSet: v.SentinelMaster},
		DisableCache: true,
		// No resend on a new connection, as for the control entries
		// (internal/server/control.go): a failed call returns its error to
		// certmagic, whose obtain and renew loops try again.
		DisableRetry: true,
	}
	if v.TLS {
		pool, err := tlsutil.CertPool(v.CAFile)
		if err != nil {
			return nil, fmt.Errorf("acme: valkey storage TLS: %w", err)
		}
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	vs, err := NewValkeyStorage(func() (valkey.Client, error) { return valkey.NewClient(opt) }, v.KeyPrefix, m.cfg.StorageSecret)
	if err != nil {
		return nil, fmt.Errorf("acme: valkey storage: %w", err)
	}
	m.vs = vs
	return vs, nil
}

// newIssuer is the ACME issuer of tls.acme: its CA, trusted roots and
// contact, with only the configured challenges. certmagic's solvers try to
// bind the challenge ports first; they are pointed at rlproxy's own
// listeners, find them taken and leave the answering to them.
func (m *Manager) newIssuer() (*certmagic.ACMEIssuer, error) {
	c := m.cfg
	iss := certmagic.ACMEIssuer{
		CA: c.CA, Email: c.Email, Agreed: true,
		DisableHTTPChallenge:    !slices.Contains(c.Challenges, config.ChallengeHTTP01),
		DisableTLSALPNChallenge: !slices.Contains(c.Challenges, config.ChallengeTLSALPN01),
		Logger:                  m.magic.Logger,
	}
	if c.CARoot != "" {
		pool, err := tlsutil.CertPool(c.CARoot)
		if err != nil {
			return nil, fmt.Errorf("acme: ca_root: %w", err)
		}
		iss.TrustedRoots = pool
	}
	if host, port, err := splitPort(m.opts.PublicAddr); err == nil {
		iss.ListenHost, iss.AltTLSALPNPort = host, port
	}
	if _, port, err := splitPort(c.HTTPListen); err == nil {
		iss.AltHTTPPort = port
	}
	return certmagic.NewACMEIssuer(m.magic, iss), nil
}

// splitPort splits HOST:PORT with a numeric port.
func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 {
		return "", 0, fmt.Errorf("acme: %q: no port", addr)
	}
	return host, port, nil
}

// allowed is on_demand's decision: only the listed names get a
// certificate at their first handshake.
func (m *Manager) allowed(_ context.Context, name string) error {
	if m.names[strings.ToLower(name)] {
		return nil
	}
	return fmt.Errorf("%q is not in tls.acme.domains", name)
}

// Start opens http_listen and, unless on_demand, starts obtaining the
// certificates in the background (certmagic's ManageAsync: loaded from
// storage when there, else ordered, retried with backoff on failure, and
// renewed before they expire). Errors: http_listen cannot be bound.
func (m *Manager) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if m.cfg.HTTPListen != "" {
		ln, err := net.Listen("tcp", m.cfg.HTTPListen)
		if err != nil {
			return fmt.Errorf("tls.acme.http_listen: listening on %s: %w", m.cfg.HTTPListen, err)
		}
		m.httpLn = ln
		// Challenges and redirects are small: short timeouts, small heads.
		m.hs = &http.Server{
			Handler:           m.issuer.HTTPChallengeHandler(redirect(m.opts.PublicAddr)),
			ReadHeaderTimeout: 10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          logging.LibraryLog(m.opts.Log, slog.LevelDebug, "acme http_listen"),
		}
		go func() {
			if err := m.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.opts.Log.Error("tls.acme.http_listen stopped", "err", err.Error())
			}
		}()
	}
	if m.cfg.OnDemand {
		return nil
	}
	if err := m.magic.ManageAsync(ctx, m.cfg.Domains); err != nil {
		// Only a problem before any ACME transaction (a bad name, a
		// storage that cannot be read): logged, the listeners serve on.
		m.opts.Log.Error("acme: managing certificates", "err", err.Error())
	}
	return nil
}

// HTTPAddr is http_listen's address once Start has returned, "" without.
func (m *Manager) HTTPAddr() string {
	if m.httpLn == nil {
		return ""
	}
	return m.httpLn.Addr().String()
}

// ConfigForClient is the handshake configuration for hello, given base,
// the load's own (static certificate, client CAs): a TLS-ALPN-01
// validation gets the challenge configuration (only acme-tls/1, and no
// client certificate asked: over TLS 1.2 a client_auth: require would fail
// the validator's handshake); any other handshake base with ACME's
// certificates for the names they cover and acme-tls/1 among its
// protocols.
func (m *Manager) ConfigForClient(hello *tls.ClientHelloInfo, base *tls.Config) *tls.Config {
	if len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acmez.ACMETLS1Protocol {
		return m.challenge
	}
	if d := m.derived.Load(); d != nil && d.base == base {
		return d.conf
	}
	conf := base.Clone()
	conf.NextProtos = append(slices.Clip(base.NextProtos), acmez.ACMETLS1Protocol)
	conf.GetCertificate = m.certificate
	m.derived.Store(&derived{base: base, conf: conf})
	return conf
}

// certificate serves ACME's certificate for a name it covers, and the
// static one (tls.cert_file) for any other name, or while ACME's is not
// there yet.
func (m *Manager) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	static := m.opts.Static()
	if static != nil && !m.names[strings.ToLower(hello.ServerName)] {
		return static, nil
	}
	cert, err := m.magic.GetCertificate(hello)
	if err != nil && static != nil {
		return static, nil
	}
	return cert, err
}

// Close stops obtaining and renewing, closes http_listen (its requests
// are cut: challenges and redirects are short) and the Valkey client.
// Calls after the first do nothing.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		if m.cancel != nil {
			m.cancel()
		}
		if m.hs != nil {
			_ = m.hs.Close()
		}
		if m.cache != nil {
			m.cache.Stop()
		}
		if m.vs != nil {
			m.vs.Close()
		}
	})
}

// redirect answers every request with a permanent redirect (308, which
// keeps the method and body) to the same host and URI over HTTPS on the
// public listener's port.
func redirect(publicAddr string) http.Handler {
	_, port, _ := net.SplitHostPort(publicAddr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "Host header required", http.StatusBadRequest)
			return
		}
		if port != "" && port != "443" {
			host = net.JoinHostPort(host, port)
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// leafOf returns c's parsed leaf (nil for none).
func leafOf(c *tls.Certificate) *x509.Certificate {
	if c == nil {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	return leaf
}
