package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// echoTransport is the built-in `echo` upstream: the transport of a
// reverse proxy like any other (the same rewriter: request line after a
// route's strip_prefix or rewrite, Host, X-Forwarded-For, -Host and
// -Proto, X-Real-IP, X-Request-Id, request_headers), which answers 200
// itself with a JSON description of the request it was handed — what a
// real upstream would receive — so rlproxy can be tried with nothing else
// running.
type echoTransport struct{}

// RoundTrip implements http.RoundTripper; it reads r's body (counting its
// bytes) and never fails.
func (echoTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var n int64
	if r.Body != nil {
		n, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	hdr := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		if len(v) > 0 {
			hdr[k] = v[0]
		}
	}
	hdr["Host"] = r.Host
	path := r.URL.Opaque
	if path == "" {
		path = r.URL.EscapedPath()
	}
	body, _ := json.Marshal(struct {
		Echo      bool              `json:"echo"`
		Method    string            `json:"method"`
		Path      string            `json:"path"`
		Query     string            `json:"query,omitempty"`
		Remote    string            `json:"remote"`
		BodyBytes int64             `json:"body_bytes"`
		Headers   map[string]string `json:"headers"`
	}{true, r.Method, path, r.URL.RawQuery, r.RemoteAddr, n, hdr})
	body = append(body, '\n')
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}
