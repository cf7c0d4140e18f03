package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"time"

	"rlproxy/internal/algo"
	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
	"rlproxy/internal/live"
	"rlproxy/internal/proxy"
)

// assets are the page's template, script and style, in the binary: the
// page works offline and needs no build step.
//
//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every page response: nothing but
// this listener's own script, style and JSON; no inline script or style,
// no frames, forms only to itself.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// TopN is how many clients each policy's top refused list shows.
const TopN = 20

// Status is what the page's overview shows of the running process beyond
// its configuration.
type Status struct {
	// LastReload is when the configuration was last loaded or a reload
	// refused; ReloadError is empty when that load succeeded, else its
	// problems, one FILE:LINE: field: message per line.
	LastReload  time.Time
	ReloadError string
	// StoreUp is rlproxy_store_up; BreakerOpen is rlproxy_breaker_open
	// (meaningful on the valkey store only).
	StoreUp, BreakerOpen bool
}

// PageSource is what the admin page reads from the running process.
type PageSource struct {
	Version string
	Started time.Time
	// Runtime is the configuration currently served.
	Runtime func() *proxy.Runtime
	// Status is called once per page view.
	Status func() Status
	// Live holds the rates and top refused clients.
	Live *live.Recorder
	// Clients shows client ids as the refusal log does (nil: a Display of
	// the page's own).
	Clients *clientkey.Display
}

// page serves GET /, /api/stats and /static/.
type page struct {
	src     PageSource
	tmpl    *template.Template
	clients *clientkey.Display
}

// WithPage serves the admin page (docs/reference/operations.md, "Admin page") on GET /, its
// JSON on GET /api/stats and its assets under /static/ — only when the
// listener is on a loopback address or admin.basic_auth is configured.
func WithPage(src PageSource) Option {
	return func(s *Server, mux *http.ServeMux) {
		p := &page{src: src, tmpl: template.Must(template.New("page.html").Funcs(funcs()).ParseFS(assets, "assets/page.html"))}
		p.clients = src.Clients
		if p.clients == nil {
			p.clients = clientkey.NewDisplay()
		}
		mux.Handle("GET /{$}", s.guard(src.Runtime, http.HandlerFunc(p.serveIndex)))
		mux.Handle("GET /api/stats", s.guard(src.Runtime, http.HandlerFunc(p.serveStats)))
		for _, f := range []string{"app.js", "style.css"} {
			mux.Handle("GET /static/"+f, s.guard(src.Runtime, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.ServeFileFS(w, r, assets, "assets/"+f)
			})))
		}
	}
}

// guard applies the page's access rule and security headers: the Host
// must name this listener (Server.hostAllowed); on a listener that is not
// loopback the page needs admin.basic_auth; with it, every request must
// carry the user and password (RFC 7617).
func (s *Server) guard(runtime func() *proxy.Runtime, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := securityHeaders(w)
		if !s.hostAllowed(r, runtime().Config.Admin.Hosts) {
			plain(w, http.StatusMisdirectedRequest, "unknown Host: the admin listener answers to localhost, IP addresses, admin_listen's host and admin.hosts")
			return
		}
		auth := runtime().Config.Admin.BasicAuth
		if auth == nil && !s.loopback {
			plain(w, http.StatusForbidden, "the admin page is off: admin_listen is not a loopback address and admin.basic_auth is not set")
			return
		}
		if auth != nil && !authorized(r, auth) {
			hd.Set("WWW-Authenticate", `Basic realm="rlproxy admin", charset="UTF-8"`)
			plain(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// securityHeaders sets the headers of every page and control API
// response, and returns w's header.
func securityHeaders(w http.ResponseWriter) http.Header {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	return hd
}

// authorized compares r's Basic credentials with a in constant time
// (over SHA-256 digests, so lengths leak nothing either).
func authorized(r *http.Request, a *config.BasicAuth) bool {
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	hu, hp := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
	wu, wp := sha256.Sum256([]byte(a.User)), sha256.Sum256([]byte(a.Password))
	return subtle.ConstantTimeCompare(hu[:], wu[:])&subtle.ConstantTimeCompare(hp[:], wp[:]) == 1
}

// isLoopback reports whether a listener address is on a loopback interface.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// indexView is the data of page.html.
type indexView struct {
	Version, ConfigPath, Digest, Store, Breaker string
	Uptime                                      string
	Status                                      Status
	Routes                                      []routeView
	Stats                                       live.Snapshot
	Rates                                       map[string]rates
	Lookup                                      lookupView
	Overload                                    []overloadView
}

// rates are a route's mean rates over the last few seconds.
type rates struct{ Allowed, Delayed, Refused float64 }

// RateSeconds is how many of the latest one-second samples the page's
// current rates average.
const RateSeconds = 5

func (p *page) serveIndex(w http.ResponseWriter, r *http.Request) {
	rt := p.src.Runtime()
	cfg := rt.Config
	st := p.src.Status()
	v := indexView{
		Version: p.src.Version, ConfigPath: cfg.Path, Digest: hex.EncodeToString(cfg.Digest[:]),
		Store: cfg.Store.Type, Breaker: "none (memory store)", Uptime: algo.FormatDuration(time.Since(p.src.Started).Round(time.Second)),
		Status: st, Routes: describeRoutes(cfg), Stats: p.snapshot(cfg), Rates: map[string]rates{},
		Lookup: p.lookup(r.Context(), rt, r.URL.Query()), Overload: overloadViews(rt, time.Now()),
	}
	if cfg.Store.Type == "valkey" {
		v.Breaker = "closed"
		if st.BreakerOpen {
			v.Breaker = "open: the store is skipped, each policy's fail mode applies"
		}
	}
	for _, rr := range v.Stats.Routes {
		v.Rates[rr.Name] = rates{mean(rr.Allowed), mean(rr.Delayed), mean(rr.Refused)}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// An error here is a write to a client that left: the response has
	// started, there is nobody to tell.
	_ = p.tmpl.Execute(w, &v)
}

// mean is the mean of xs's last RateSeconds values, to 0.1.
func mean(xs []float64) float64 {
	xs = xs[max(len(xs)-RateSeconds, 0):]
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return float64(int64(sum/float64(len(xs))*10+0.5)) / 10
}

func (p *page) snapshot(cfg *config.Config) live.Snapshot {
	return p.src.Live.Snapshot(TopN, func(id string) string { return p.display(cfg, id) })
}

func (p *page) serveStats(w http.ResponseWriter, _ *http.Request) {
	rt := p.src.Runtime()
	st := stats{Snapshot: p.snapshot(rt.Config), Overload: overloadViews(rt, time.Now())}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&st)
}

// funcs are the template's helpers.
func funcs() template.FuncMap {
	return template.FuncMap{
		"short": func(s string) string { return s[:min(len(s), 12)] },
		"inc":   func(i int) int { return i + 1 },
		"ts":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	}
}
