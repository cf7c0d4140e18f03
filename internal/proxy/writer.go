package proxy

import (
	"bufio"
	"net"
	"net/http"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
)

// finalWriter is the ResponseWriter a forwarded request is answered
// through. It touches the final response only, never a 1xx (an interim
// response's header map is cleared by ReverseProxy after it goes out, so
// anything set before it would reach the 103 and be missing from the 200):
//   - a limited route's quota headers go on the final response (docs/CONTRACT.md:
//     every response of a limited route carries them), and on a 101 that
//     switches protocols, which is the exchange's last HTTP response;
//   - a final response without Content-Type keeps none: net/http would
//     sniff one from the body (http.DetectContentType), and nginx
//     proxy_pass invents none either. A nil value under the key is how
//     net/http is told not to (it writes nothing for it).
//
// One per forwarded request, pooled by the Server.
type finalWriter struct {
	http.ResponseWriter
	sets  config.HeaderSet
	res   *policy.Result // nil: no quota headers (an unlimited route)
	wrote bool           // the final header was prepared
}

// WriteHeader implements http.ResponseWriter.
func (w *finalWriter) WriteHeader(code int) {
	if code >= 200 {
		w.prepare()
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter (an implicit 200).
func (w *finalWriter) Write(p []byte) (int, error) {
	w.prepare()
	return w.ResponseWriter.Write(p)
}

// Hijack hands the connection over for a protocol switch (ReverseProxy
// writes the upstream's 101 itself): the quota headers go on that 101.
func (w *finalWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.res != nil && !w.wrote {
		w.wrote = true
		setQuotaHeaders(w.Header(), w.sets, w.res)
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// SetReadDeadline, EnableFullDuplex).
func (w *finalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *finalWriter) prepare() {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	if w.res != nil {
		setQuotaHeaders(h, w.sets, w.res)
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}

// forward serves r through h with a pooled finalWriter around w; res (nil
// for an unlimited route) gives the quota headers.
func (s *Server) forward(h http.Handler, w http.ResponseWriter, r *http.Request, sets config.HeaderSet, res *policy.Result) {
	fw := s.writers.Get().(*finalWriter)
	*fw = finalWriter{ResponseWriter: w, sets: sets, res: res}
	h.ServeHTTP(fw, r)
	*fw = finalWriter{}
	s.writers.Put(fw)
}
