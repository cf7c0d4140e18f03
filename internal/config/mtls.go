package config

import (
	"maps"
	"slices"

	"gopkg.in/yaml.v3"

	"rlproxy/internal/tlsutil"
)

// clientAuth settles tls.client_auth against tls.client_ca: absent, it is
// require with a CA and none without; request and require need a CA to
// verify against, and client_crl one that signed it. It reports whether t
// is usable.
func (l *loader) clientAuth(o object, t *TLS) bool {
	switch {
	case t.ClientAuth == "" && t.ClientCA != "":
		t.ClientAuth = ClientAuthRequire
	case t.ClientAuth == "":
		t.ClientAuth = ClientAuthNone
	case t.ClientAuth != ClientAuthNone && t.ClientCA == "":
		if !o.has("client_ca") { // a bad client_ca has its own error
			l.errorf(o.get("client_auth"), o.field("client_auth"), "%q needs tls.client_ca: the CAs a client certificate must chain to", t.ClientAuth)
		}
		return false
	case t.ClientAuth == ClientAuthNone && t.ClientCA != "":
		l.warnf(o.get("client_ca"), o.field("client_ca"), "unused: client_auth is none, so no client certificate is asked for")
	}
	if t.ClientCRL != "" && t.ClientCA == "" {
		l.errorf(o.get("client_crl"), o.field("client_crl"), "needs tls.client_ca: the CA that signed the list")
		return false
	}
	if t.ClientCRL != "" {
		if _, err := tlsutil.LoadCRL(t.ClientCRL, t.ClientCA); err != nil {
			l.errorf(o.get("client_crl"), o.field("client_crl"), "%v", err)
			return false
		}
	}
	if t.ClientHeaders && t.ClientAuth == ClientAuthNone {
		l.warnf(o.get("client_headers"), o.field("client_headers"), "no client certificate is asked for (client_auth none): the headers are only removed")
	}
	return true
}

// warnTLSKeys warns about tls:FIELD key sources no client certificate can
// reach: without a public listener that asks for one (no tls section, or
// client_auth none), and on the decision interfaces, whose callers are
// other proxies. There the source is always absent and the key falls to
// the next source or ip, which the operator should know rather than find.
func (l *loader) warnTLSKeys(top object) {
	c := l.c
	uses := map[string]string{} // policy or plan field → its first tls source
	lines := map[string]int{}
	for _, name := range c.PolicyOrder {
		if s, ok := tlsSource(c.Policies[name].Key); ok {
			f := join(join("policies", name), "key")
			uses[f], lines[f] = s, c.Policies[name].Line
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		if s, ok := tlsSource(c.Plans[name].Key); ok {
			f := join(join("plans", name), "key")
			uses[f], lines[f] = s, keyLine(top, "plans")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(uses)) {
		at := &yaml.Node{Line: lines[f]}
		switch {
		case c.Listen != "" && (c.TLS == nil || c.TLS.ClientAuth == ClientAuthNone):
			l.warnf(at, f, "%s: no client certificate reaches rlproxy (no tls.client_ca, or client_auth none): every request is keyed by the next source, or ip", uses[f])
		case c.ForwardAuth.Listen != "" || c.EnvoyRLS.Listen != "":
			l.warnf(at, f, "%s: requests decided over forward_auth or envoy_rls carry no client certificate: they are keyed by the next source, or ip", uses[f])
		}
	}
}

// tlsSource returns the first tls:FIELD source of k, spelled as in the file.
func tlsSource(k KeySpec) (string, bool) {
	for _, s := range k.Sources {
		if s.Kind == SourceTLS {
			return "tls:" + s.Name, true
		}
	}
	return "", false
}
