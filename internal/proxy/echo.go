package proxy

import (
	"encoding/json"
	"io"
	"net/http"
)

// echoHandler is the built-in `echo` upstream: it answers 200 with a JSON
// description of the request it received (method, path, query, headers,
// body size), so rlproxy can be tried with nothing else running.
type echoHandler struct{}

func (echoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	hdr := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		if len(v) > 0 {
			hdr[k] = v[0]
		}
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
