package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httputil"
)

// The headers tls.client_headers sends to the upstream: the verified
// client certificate's subject (RFC 4514 string) and the lower-case hex
// SHA-256 of the certificate (DER), as nginx's $ssl_client_s_dn and
// $ssl_client_fingerprint (SHA-1 there) are commonly passed on.
const (
	hdrClientCertSubject     = "X-Client-Cert-Subject"
	hdrClientCertFingerprint = "X-Client-Cert-Fingerprint"
)

// withClientCertHeaders makes rp's requests carry the client certificate
// headers: the client's own copies are removed first, whatever it sent, so
// an upstream sees only what the handshake verified — and no header at all
// for a client without a verified certificate.
func withClientCertHeaders(rp *httputil.ReverseProxy) {
	inner := rp.Rewrite
	rp.Rewrite = func(pr *httputil.ProxyRequest) {
		inner(pr)
		h := pr.Out.Header
		delete(h, hdrClientCertSubject)
		delete(h, hdrClientCertFingerprint)
		cs := pr.In.TLS
		if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return
		}
		leaf := cs.VerifiedChains[0][0]
		sum := sha256.Sum256(leaf.Raw)
		h[hdrClientCertSubject] = []string{leaf.Subject.String()}
		h[hdrClientCertFingerprint] = []string{hex.EncodeToString(sum[:])}
	}
}
