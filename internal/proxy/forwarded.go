package proxy

import (
	"net/http"
	"strings"
)

// forwardingFields are, lower-case, the fields the upstream gets from
// rlproxy alone: the ones rewrite sets and "X-Forwarded", which
// httputil.ReverseProxy removes from a client's request with them.
var forwardingFields = [...]string{"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded", "x-real-ip"}

// dropForwardingAliases deletes from h every field spelled with "_" for
// "-" as one of forwardingFields ("X_Real_IP", "X_Forwarded_For"): an
// upstream that reads fields CGI-style (HTTP_X_REAL_IP; Puma before
// 6.4.3, for one) reads it as the field rlproxy sets, so a client could
// forge the address the upstream sees. nginx drops every field with "_"
// in its name by default (underscores_in_headers off); rlproxy forwards
// the others. It does not allocate.
func dropForwardingAliases(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		for _, f := range forwardingFields {
			if len(k) == len(f) && sameFieldName(k, f) {
				delete(h, k)
				break
			}
		}
	}
}

// sameFieldName reports whether k is the lower-case name f read with case
// folded and "_" as "-".
func sameFieldName(k, f string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '_':
			c = '-'
		}
		if c != f[i] {
			return false
		}
	}
	return true
}
