package config

import (
	"crypto/tls"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Admin is the `admin:` section: the admin page served on admin_listen
// (docs/reference/operations.md, "Admin page").
type Admin struct {
	// ShowClientIPs shows client addresses in the top refused list as they
	// are; false (the default) shows a keyed hash of each instead.
	ShowClientIPs bool
	// BasicAuth, when non-nil, protects the page and its JSON with HTTP
	// Basic authentication (RFC 7617); it is required to serve the page on
	// an admin_listen that is not a loopback address.
	BasicAuth *BasicAuth
	// TokenFile is admin.token_file resolved against the config file's
	// directory ("" when absent): named bearer tokens (ReadTokenFile) for
	// the control API, reread whenever the file changes.
	TokenFile string
	// AuditLog is admin.audit_log resolved likewise ("" when absent: the
	// audit lines go to the process log): one JSON line per change made
	// through the control API.
	AuditLog string
	// Hosts are the extra names the admin listener answers to in the Host
	// header, beside localhost, IP addresses and admin_listen's host
	// (DNS rebinding).
	Hosts []string
	// TLS, when non-nil, serves admin_listen over TLS with this
	// certificate (restart-only, as the address): bearer tokens and
	// changes are refused off loopback without it.
	TLS *AdminTLS `restart:"admin.tls,onoff"`
}

// AdminTLS is `admin.tls:`: the admin listener's certificate and key
// (PEM files, resolved against the config file's directory).
type AdminTLS struct {
	CertFile string `restart:"admin.tls.cert_file"`
	KeyFile  string `restart:"admin.tls.key_file"`
}

// BasicAuth is one user and password; the password comes from the
// environment variable named by password_env, never from the file.
type BasicAuth struct {
	User     string
	Password string
}

// minAdminPassword is the shortest admin password accepted, in bytes.
const minAdminPassword = 12

// adminSection is `admin:`.
func (l *loader) adminSection() *section {
	a := &l.c.Admin
	return &section{optional: true, fields: []field{
		{name: "show_client_ips", def: "false", value: l.boolVal(&a.ShowClientIPs),
			doc: "Show client addresses in the top refused list as they are; false shows a keyed hash of each."},
		{name: "basic_auth", sub: l.basicAuthSection(), doc: "HTTP Basic authentication (RFC 7617) of the page and its JSON; required on an admin_listen that is not loopback."},
		{name: "token_file", value: l.tokenFileVal(), doc: "File of name:token[:read|write] lines (relative to this file): bearer tokens for the control API, reread when it changes."},
		{name: "audit_log", value: l.auditLogVal(), doc: "File the control API appends one JSON line per change to (relative to this file; mode 0600); default the process log."},
		{name: "tls", sub: l.adminTLSSection(), doc: "Serve admin_listen over TLS: {cert_file, key_file}; tokens and changes off loopback need it. Restart-only."},
		{name: "hosts", value: l.hostsVal(&a.Hosts), doc: "Host names the page and control API answer to besides localhost, IP addresses and admin_listen's host (DNS rebinding)."},
	}}
}

// basicAuthSection is `admin.basic_auth:`; it protects the page only when
// both fields are valid.
func (l *loader) basicAuthSection() *section {
	var ba BasicAuth
	var ok [2]bool
	user := value{stringShape, func(n *yaml.Node, path string) {
		if s, good := l.str(n, path); good && !validUser(s) {
			l.errorf(n, path, "%q: want 1 to 64 printable characters without a colon (RFC 7617)", s)
		} else if good {
			ba.User, ok[0] = s, true
		}
	}}
	password := value{envNameShape, func(n *yaml.Node, path string) {
		ba.Password, ok[1] = l.secretEnv(n, path, minAdminPassword)
	}}
	return &section{optional: true, fields: []field{
		{name: "user", need: "required: the user name the browser sends", value: user, doc: "User name: 1 to 64 printable characters, no colon."},
		{name: "password_env", need: "required: the environment variable holding the password", value: password,
			doc: "Environment variable holding the password (at least 12 bytes), never inline."},
	}, check: func(o object) {
		if ok[0] && ok[1] {
			l.c.Admin.BasicAuth = &ba
		}
	}}
}

// validUser reports whether s can be a Basic user-id: no colon (RFC 7617
// §2 splits user-pass at the first one), no control characters.
func validUser(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r == ':' || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// hostsVal is admin.hosts: DNS names (one label or more, lower-cased),
// each once. IP addresses need no entry: any is accepted.
func (l *loader) hostsVal(dst *[]string) value {
	return value{func() schema { return listShape(schema{"type": "string", "minLength": 1}, false) }, func(n *yaml.Node, path string) {
		items, vals, ok := l.strings(n, path, false)
		if !ok {
			return
		}
		var hosts []string
		for i, v := range vals {
			name := strings.ToLower(strings.TrimSuffix(v, "."))
			switch {
			case !validHostName(name) && !validHostName(name+".local"):
				l.errorf(items[i], index(path, i), "%q: want a DNS host name, without a port", v)
				return
			case slices.Contains(hosts, name):
				l.errorf(items[i], index(path, i), "%q: listed twice", v)
				return
			}
			hosts = append(hosts, name)
		}
		*dst = hosts
	}}
}

// adminTLSSection is `admin.tls:`; the pair is loaded here, so a bad
// certificate fails validate, not the start.
func (l *loader) adminTLSSection() *section {
	var t AdminTLS
	var ok [2]bool
	file := func(dst *string, i int) value {
		return value{stringShape, func(n *yaml.Node, path string) { *dst, ok[i] = l.filePath(n, path, l.dir) }}
	}
	return &section{optional: true, fields: []field{
		{name: "cert_file", need: "required: a PEM file", value: file(&t.CertFile, 0), doc: "PEM certificate chain of the admin listener."},
		{name: "key_file", need: "required: a PEM file", value: file(&t.KeyFile, 1), doc: "PEM private key."},
	}, check: func(o object) {
		if !ok[0] || !ok[1] {
			return // a missing or bad file is reported
		}
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			l.errorf(o.missing(), o.path, "loading certificate and key: %v", err)
			return
		}
		l.c.Admin.TLS = &t
	}}
}
