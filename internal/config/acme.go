package config

import (
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ACME is tls.acme: certificates obtained and renewed from an ACME CA
// (RFC 8555) for the listed names, next to or instead of tls.cert_file.
type ACME struct {
	// Email is the ACME account's contact ("" = none).
	Email string
	// Domains are the names certificates are obtained for (one each); with
	// OnDemand the names a handshake may obtain one for.
	Domains []string
	// CA is the ACME directory URL.
	CA string
	// CARoot is a PEM bundle trusted for the CA's own HTTPS (a test CA);
	// "" = the system roots.
	CARoot string
	// Challenges are the challenge types offered: ChallengeHTTP01 (answered
	// on HTTPListen) and ChallengeTLSALPN01 (answered on the public
	// listener).
	Challenges []string
	// Storage is the directory holding the account, certificates and keys,
	// or StorageValkey for the Valkey of store.valkey.
	Storage string
	// StorageSecret encrypts what the Valkey storage keeps (nil with a
	// directory).
	StorageSecret []byte
	// HTTPListen is the plain listener answering HTTP-01 and redirecting
	// every other request to HTTPS ("" = none).
	HTTPListen string
	// OnDemand obtains a name's certificate at its first handshake rather
	// than at start.
	OnDemand bool
}

// ACME challenge types (RFC 8555 §8.3, RFC 8737) and the Valkey storage.
const (
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
	StorageValkey      = "valkey"
	// DefaultACMECA is Let's Encrypt's production directory.
	DefaultACMECA = "https://acme-v02.api.letsencrypt.org/directory"
	// DefaultACMEStorage is where certificates are kept without storage.
	DefaultACMEStorage = "/var/lib/rlproxy/acme"
)

// acmeSection is `tls.acme:`; dst receives it when valid.
func (l *loader) acmeSection(dst **ACME) *section {
	a := &ACME{}
	ok := true
	bad := func() { ok = false }
	challenges := l.acmeChallengesVal(a, bad)
	return &section{
		optional: true,
		fields: []field{
			{name: "email", value: l.acmeEmailVal(a, bad), doc: "Contact address of the ACME account (the CA's expiry and policy notices)."},
			{name: "domains", need: "required: the names to obtain certificates for", value: value{func() schema { return listShape(stringShape(), false) }, func(n *yaml.Node, path string) {
				if !l.acmeDomains(n, path, a) {
					bad()
				}
			}}, doc: "Host names to obtain a certificate for, one each (no wildcards: DNS-01 is not supported); with on_demand the names a handshake may obtain one for."},
			{name: "ca", def: `"` + DefaultACMECA + `"`, value: l.acmeCAVal(a, bad), doc: "ACME directory URL; default Let's Encrypt production."},
			{name: "ca_root", value: value{stringShape, func(n *yaml.Node, path string) {
				var good bool
				if a.CARoot, good = l.caFile(n, path); !good {
					bad()
				}
			}}, doc: "PEM bundle trusted for the CA's own HTTPS (a test CA such as pebble); default the system roots."},
			{name: "challenges", value: challenges,
				doc: "Challenge types offered: http-01 (on http_listen) and tls-alpn-01 (on listen, which the CA reaches on port 443). Default: tls-alpn-01, and http-01 with http_listen."},
			{name: "storage", def: `"` + DefaultACMEStorage + `"`, value: value{stringShape, func(n *yaml.Node, path string) {
				if !l.acmeStorage(n, path, a) {
					bad()
				}
			}}, doc: "Directory (created 0700, files 0600) holding the ACME account, certificates and keys, or valkey: the store.valkey server, shared by a fleet (needs store type valkey and storage_secret_env)."},
			{name: "storage_secret_env", value: l.acmeSecretVal(a),
				doc: "Environment variable holding the secret (at least 16 bytes) that encrypts what storage: valkey keeps (AES-256-GCM); the same on every instance."},
			{name: "http_listen", value: l.listenVal(&a.HTTPListen),
				doc: "Plain HTTP listener, HOST:PORT (\":80\" needs CAP_NET_BIND_SERVICE): answers HTTP-01 challenges and redirects every other request to HTTPS."},
			{name: "on_demand", def: "false", value: l.boolVal(&a.OnDemand),
				doc: "Obtain a name's certificate at its first TLS handshake instead of at start; only names in domains."},
		},
		extend: func(sc schema) {
			sc["properties"].(schema)["domains"].(schema)["minItems"] = 1
			// The Valkey storage is encrypted with a secret of its own.
			sc["if"] = schema{"properties": schema{"storage": schema{"const": StorageValkey}}, "required": []any{"storage"}}
			sc["then"] = schema{"required": []any{"storage_secret_env"}}
		},
		check: func(o object) {
			if o.bad || !ok || len(a.Domains) == 0 || !l.acmeChallenges(o, a) {
				return
			}
			if a.Storage == StorageValkey && a.StorageSecret == nil {
				l.errorf(o.missing(), o.field("storage_secret_env"), "required with storage valkey: the secret that encrypts the stored keys")
				return
			}
			if a.Storage != StorageValkey && o.has("storage_secret_env") {
				l.warnf(o.get("storage_secret_env"), o.field("storage_secret_env"), "unused: only storage valkey is encrypted (a directory is protected by its 0700 permissions)")
			}
			*dst = a
		},
	}
}

// acmeSecretVal decodes tls.acme.storage_secret_env, reading the variable
// only for storage valkey (decoded before it), the one storage it encrypts:
// beside a directory it is unused, a warning, unset or not.
func (l *loader) acmeSecretVal(a *ACME) value {
	secret := l.secretVal(&a.StorageSecret, 16)
	return value{secret.shape, func(n *yaml.Node, path string) {
		if a.Storage == StorageValkey {
			secret.set(n, path)
		}
	}}
}

// acmeEmailVal decodes tls.acme.email, a bare address (RFC 5322
// addr-spec): the account's contact is its mailto: URL (RFC 8555 §7.3),
// which a CA would otherwise refuse (invalidContact) only at the first order.
func (l *loader) acmeEmailVal(a *ACME, bad func()) value {
	return value{stringShape, func(n *yaml.Node, path string) {
		v, ok := l.str(n, path)
		if !ok {
			bad()
			return
		}
		if addr, err := mail.ParseAddress(v); v != "" && (err != nil || addr.Address != v) {
			l.errorf(n, path, "%q: want an email address such as ops@example.com", v)
			bad()
			return
		}
		a.Email = v
	}}
}

// acmeChallengesVal decodes tls.acme.challenges into a (sorted, each
// once); bad marks the section unusable.
func (l *loader) acmeChallengesVal(a *ACME, bad func()) value {
	return value{func() schema { return listShape(enumShape(ChallengeHTTP01, ChallengeTLSALPN01), false) }, func(n *yaml.Node, path string) {
		items, vals, good := l.strings(n, path, false)
		for i, v := range vals {
			if v != ChallengeHTTP01 && v != ChallengeTLSALPN01 {
				l.errorf(items[i], index(path, i), "%q: want %s or %s (DNS-01, for wildcard names, is not supported)", v, ChallengeHTTP01, ChallengeTLSALPN01)
				good = false
			}
		}
		if good && len(vals) == 0 {
			l.errorf(n, path, "want at least one of %s, %s", ChallengeHTTP01, ChallengeTLSALPN01)
			good = false
		}
		if !good {
			bad()
			return
		}
		a.Challenges = slices.Compact(slices.Sorted(slices.Values(vals)))
	}}
}

// acmeCAVal decodes tls.acme.ca: an https:// URL.
func (l *loader) acmeCAVal(a *ACME, bad func()) value {
	return value{stringShape, func(n *yaml.Node, path string) {
		if s, good := l.str(n, path); good {
			if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" {
				l.errorf(n, path, "%q: want the https:// URL of an ACME directory", s)
				bad()
			} else {
				a.CA = s
			}
		}
	}}
}

// acmeDomains decodes tls.acme.domains: host names, lower-cased, each once.
func (l *loader) acmeDomains(n *yaml.Node, path string, a *ACME) bool {
	items, vals, ok := l.strings(n, path, false)
	if !ok {
		return false
	}
	seen := map[string]bool{}
	for i, v := range vals {
		name := strings.ToLower(strings.TrimSuffix(v, "."))
		switch {
		case strings.Contains(name, "*"):
			l.errorf(items[i], index(path, i), "%q: wildcard names need the DNS-01 challenge, which rlproxy does not support", v)
			ok = false
		case !validHostName(name):
			l.errorf(items[i], index(path, i), "%q: want a DNS host name", v)
			ok = false
		case seen[name]:
			l.errorf(items[i], index(path, i), "%q: listed twice", v)
			ok = false
		}
		seen[name] = true
		a.Domains = append(a.Domains, name)
	}
	if ok && len(vals) == 0 {
		l.errorf(n, path, "want at least one name")
		ok = false
	}
	return ok
}

// validHostName reports whether s is a DNS host name (RFC 1123 §2.1
// labels, at least two of them: a CA issues for no single-label name).
func validHostName(s string) bool {
	labels := strings.Split(s, ".")
	if len(s) > 253 || len(labels) < 2 {
		return false
	}
	for _, lb := range labels {
		if lb == "" || len(lb) > 63 || lb[0] == '-' || lb[len(lb)-1] == '-' {
			return false
		}
		for _, c := range lb {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// acmeStorage decodes tls.acme.storage: valkey, or a directory (relative
// to the config file's) that, when it exists, is one. It is created at
// start, not by `rlproxy validate`.
func (l *loader) acmeStorage(n *yaml.Node, path string, a *ACME) bool {
	s, ok := l.str(n, path)
	switch {
	case !ok:
		return false
	case s == StorageValkey:
		a.Storage = s
		return true
	case s == "":
		l.errorf(n, path, "want a directory, or valkey")
		return false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(l.dir, s)
	}
	if fi, err := os.Stat(s); err == nil && !fi.IsDir() {
		l.errorf(n, path, "%q: not a directory", n.Value)
		return false
	}
	a.Storage = s
	return true
}

// acmeChallenges settles the challenge types against http_listen: http-01
// needs it, and absent challenges mean tls-alpn-01 plus http-01 with it.
func (l *loader) acmeChallenges(o object, a *ACME) bool {
	if a.Challenges == nil {
		a.Challenges = []string{ChallengeTLSALPN01}
		if a.HTTPListen != "" {
			a.Challenges = []string{ChallengeHTTP01, ChallengeTLSALPN01}
		}
		return true
	}
	if slices.Contains(a.Challenges, ChallengeHTTP01) && a.HTTPListen == "" {
		l.errorf(o.get("challenges"), o.field("challenges"), "http-01 needs tls.acme.http_listen: the plain listener the CA validates on")
		return false
	}
	return true
}

// checkACME applies the rules that span sections once all are decoded:
// a public listener to serve the certificates on, http_listen apart from
// the other listeners, and storage valkey only with the Valkey store.
func (l *loader) checkACME(top object) {
	if l.c.TLS == nil || l.c.TLS.ACME == nil {
		return
	}
	a, c := l.c.TLS.ACME, l.c
	acme := mappingValue(top.get("tls"), "acme")
	if c.Listen == "" {
		l.errorf(&yaml.Node{Line: keyLine(top, "tls")}, "tls.acme", "needs a public listener (listen): certificates are served there")
	}
	if a.HTTPListen != "" {
		l.distinctListener(mappingValue(acme, "http_listen"), "tls.acme.http_listen", a.HTTPListen,
			"listen", c.Listen, "admin_listen", c.AdminListen, "forward_auth", c.ForwardAuth.Listen, "envoy_rls", c.EnvoyRLS.Listen)
	}
	if a.Storage == StorageValkey && c.Store.Type != "valkey" {
		l.errorf(mappingValue(acme, "storage"), "tls.acme.storage", "valkey needs store type valkey: the certificates are kept on its store.valkey server")
	}
}

// mappingValue is the value of key in the mapping n (aliases resolved),
// or nil: where a field decoded earlier is written, for an error found
// later.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// certPairOptional reports whether tls o, which has acme, goes on without
// a certificate pair: neither cert_file nor key_file is written. One
// without the other is an error; a bad file has its own.
func (l *loader) certPairOptional(o object) bool {
	hasCert, hasKey := o.has("cert_file"), o.has("key_file")
	switch {
	case hasCert && !hasKey:
		l.errorf(o.missing(), o.field("key_file"), "required with cert_file: the certificate's private key")
	case hasKey && !hasCert:
		l.errorf(o.missing(), o.field("cert_file"), "required with key_file: the key's certificate")
	}
	return !hasCert && !hasKey
}
