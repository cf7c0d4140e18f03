package proxy

import (
	"encoding/json"
	"io"
	"net/http"

	"rlproxy/internal/realip"
)

// echoHandler is the built-in `echo` upstream: it answers 200 with a JSON
// description of the request as an upstream would receive it (method, path,
// query, body size, and the headers with what the rewriter sets: Host (the
// client's, upstreams.NAME.host's default), X-Forwarded-For, -Host and
// -Proto, X-Real-IP, and X-Request-Id while the access log is on), so
// rlproxy can be tried with nothing else running.
type echoHandler struct{ realIP *realip.Resolver }

func (e echoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	hdr := make(map[string]string, len(r.Header)+5)
	for k, v := range r.Header {
		if len(v) > 0 {
			hdr[k] = v[0]
		}
	}
	peer := peerAddr(r.RemoteAddr)
	hdr["Host"] = r.Host
	hdr["X-Forwarded-Host"] = r.Host
	hdr["X-Forwarded-Proto"] = protoHTTP
	if r.TLS != nil {
		hdr["X-Forwarded-Proto"] = protoHTTPS
	}
	hdr["X-Forwarded-For"] = e.realIP.ForwardedFor(peer, r.Header)
	if ip := e.realIP.ClientIP(peer, r.Header); ip.IsValid() {
		hdr["X-Real-Ip"] = ip.String() // as a proxied upstream gets it
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Echo      bool              `json:"echo"`
		Method    string            `json:"method"`
		Path      string            `json:"path"`
		Query     string            `json:"query,omitempty"`
		Remote    string            `json:"remote"`
		BodyBytes int64             `json:"body_bytes"`
		Headers   map[string]string `json:"headers"`
	}{true, r.Method, r.URL.Path, r.URL.RawQuery, r.RemoteAddr, n, hdr})
}
