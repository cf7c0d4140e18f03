package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"rlproxy/internal/config"
)

// principal is who an admin request authenticated as: the basic_auth user
// or a token's name; write says it may change entries.
type principal struct {
	name  string
	write bool
}

// refusal is why the control API refused a request, as problem+json.
type refusal struct {
	status       int
	kind, detail string
}

// hostAllowed reports whether r's Host names this listener: localhost,
// an IP address, the host name admin_listen gives, or one of admin.hosts.
// A browser sends the page's name as Host, so a site whose name an
// attacker rebinds to 127.0.0.1 (DNS rebinding) is refused here; an IP
// address cannot be rebound (a page served from one reaches only that
// address), so any is accepted — the listener's own behind NAT or a
// port-forward included.
func (s *Server) hostAllowed(r *http.Request, hosts []string) bool {
	h := r.Host
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if h == "localhost" || net.ParseIP(h) != nil {
		return true
	}
	if own, _, err := net.SplitHostPort(s.addr); err == nil && h == strings.ToLower(strings.TrimSuffix(own, ".")) {
		return true
	}
	return slices.Contains(hosts, h)
}

// localIP is the address r's connection arrived at (nil if unknown).
func localIP(r *http.Request) net.IP {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		return a.IP
	}
	return nil
}

// private reports whether r's credentials cannot have crossed a network
// in clear: it came over TLS, or to a loopback address (a port-forward or
// an SSH tunnel ends there).
func private(r *http.Request) bool {
	ip := localIP(r)
	return r.TLS != nil || ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether a browser's request comes from this page: no
// Origin (not a browser's cross-site request: curl, rlproxy ctl) or an
// Origin naming r's own scheme and Host, and no cross-site Sec-Fetch-Site
// (Fetch Metadata). Forms and fetches from another site carry a foreign
// Origin (RFC 6454 §7), so they cannot change entries (CSRF).
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(o, scheme+r.Host)
}

// authenticate finds who r is from its Authorization header: Basic
// against admin.basic_auth, Bearer against admin.token_file. ok is false
// when there are credentials and they are wrong (or of a kind not
// configured); a request without any gives a zero principal and ok.
func (s *Server) authenticate(r *http.Request, cfg *config.Admin) (p principal, has, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return principal{}, false, true
	}
	if scheme, tok, found := strings.Cut(h, " "); found && strings.EqualFold(scheme, "Bearer") {
		if cfg.TokenFile == "" {
			return principal{}, true, false
		}
		t, good := s.tokens.lookup(cfg.TokenFile, strings.TrimSpace(tok))
		return principal{name: t.Name, write: t.Write}, true, good
	}
	if cfg.BasicAuth != nil && authorized(r, cfg.BasicAuth) {
		return principal{name: cfg.BasicAuth.User, write: true}, true, true
	}
	return principal{}, true, false
}

// tokenFile is admin.token_file as last read: each lookup checks the file
// (path, identity, size, modification time) and rereads it when it
// changed, so a new or revoked token applies to the very next request,
// and the file is read only when it changes. A file that no longer parses
// refuses every token until it is fixed (its problems are logged once).
type tokenFile struct {
	log  *slog.Logger
	mu   sync.Mutex
	path string
	info os.FileInfo
	toks []config.AdminToken
}

// lookup returns the token of path's file that equals bearer, comparing
// digests in constant time.
func (f *tokenFile) lookup(path, bearer string) (config.AdminToken, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(path)
	if err != nil || f.info == nil || path != f.path || !os.SameFile(fi, f.info) || fi.Size() != f.info.Size() || !fi.ModTime().Equal(f.info.ModTime()) {
		f.reread(path, fi, err)
	}
	want := sha256.Sum256([]byte(bearer))
	var found config.AdminToken
	match := 0
	for _, t := range f.toks {
		got := sha256.Sum256([]byte(t.Token))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			found, match = t, 1
		}
	}
	return found, match == 1
}

// reread loads path (whose Stat gave fi, statErr) into f.
func (f *tokenFile) reread(path string, fi os.FileInfo, statErr error) {
	logged := f.path == path && f.info == nil // this failure is already logged
	f.path, f.info, f.toks = path, nil, nil
	if statErr != nil {
		if !logged {
			f.log.Error("admin.token_file unreadable: every token is refused", "err", statErr.Error())
		}
		return
	}
	toks, err := config.ReadTokenFile(path)
	if err != nil {
		f.info = fi // not reread until it changes again
		f.log.Error("admin.token_file refused: every token is refused until it is fixed", "err", err.Error())
		return
	}
	f.info, f.toks = fi, toks
	f.log.Info("admin.token_file read", "path", path, "tokens", len(toks))
}
