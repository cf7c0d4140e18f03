package config

import (
	"net/textproto"
	"os"
	"strings"
)

// forwardingFields are an upstream's forwarding fields, decoded by
// upstreamFields (after url, which they depend on).
func forwardingFields() []field {
	return []field{
		{name: "host", def: HostClient, value: checked(stringShape),
			doc: "Host header sent upstream: client (the request's, as nginx proxy_set_header Host $host), upstream (the server URL's host[:port]) or a host name."},
		{name: "tls_server_name", value: checked(stringShape), doc: "https upstream: the name sent in SNI and verified in its certificate; default the URL's host."},
		{name: "protocol", def: ProtocolHTTP1, value: checked(func() schema { return enumShape(ProtocolHTTP1, ProtocolH2C) }),
			doc: "http1, or h2c (cleartext HTTP/2 with prior knowledge, gRPC) for an http:// url; https negotiates h2 by ALPN."},
		{name: "request_headers", value: checked(func() schema { return objectShape(headerRulesSection()) }), doc: "Headers set or removed on the request sent upstream."},
		{name: "response_headers", value: checked(func() schema { return objectShape(headerRulesSection()) }), doc: "Headers set or removed on the upstream's response."},
	}
}

// headerRulesSection is request_headers or response_headers (decoded by
// headerRules).
func headerRulesSection() *section {
	return &section{fields: []field{
		{name: "set", value: checked(func() schema { return namedShape(stringShape(), "") }), doc: "Header name → value, replacing the header."},
		{name: "set_env", value: checked(func() schema { return namedShape(envNameShape(), "") }),
			doc: "Header name → environment variable holding its value (a secret, never logged); the variable must be set."},
		{name: "remove", value: checked(func() schema { return listShape(stringShape(), true) }), doc: "Header names removed."},
	}}
}

// upstreamFields decodes an upstream's forwarding fields (docs/CONTRACT.md,
// `upstreams.NAME`): host, tls_server_name, protocol, request_headers and
// response_headers. u.URL is already decoded (nil for a builtin or a bad url).
func (l *loader) upstreamFields(o object, u *Upstream) {
	https := u.URL != nil && u.URL.Scheme == "https"
	if n := o.get("host"); n != nil {
		if s, ok := l.str(n, o.field("host")); ok {
			switch {
			case s == HostClient:
				// The default, kept as "" (the zero Upstream forwards the client's Host).
			case s == HostUpstream:
				u.Host = s
			case badHost(s):
				l.errorf(n, o.field("host"), "%q: want client, upstream or a host name (host[:port], no scheme or path)", s)
			default:
				u.Host = s
			}
		}
	}
	if n := o.get("tls_server_name"); n != nil {
		s, ok := l.str(n, o.field("tls_server_name"))
		switch {
		case !ok:
		case !https:
			l.errorf(n, o.field("tls_server_name"), "needs an https:// url")
		case s == "" || badHost(s) || strings.Contains(s, ":"):
			l.errorf(n, o.field("tls_server_name"), "%q: want a host name (no scheme, port or path)", s)
		default:
			u.TLSServerName = s
		}
	}
	if n := o.get("protocol"); n != nil {
		if s, ok := l.oneOf(n, o.field("protocol"), ProtocolHTTP1, ProtocolH2C); ok {
			if s == ProtocolH2C && https {
				l.errorf(n, o.field("protocol"), "h2c is cleartext HTTP/2 for an http:// url; an https:// upstream negotiates h2 by ALPN")
			} else if s == ProtocolH2C {
				u.Protocol = s // http1 is the default, kept as ""
			}
		}
	}
	u.RequestHeaders = l.headerRules(o, "request_headers")
	u.ResponseHeaders = l.headerRules(o, "response_headers")
}

// badHost reports whether s cannot be a Host header value: empty, a URL
// (scheme, path, query), userinfo or white space.
func badHost(s string) bool {
	return s == "" || strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ \t\r\n")
}

// headerRules decodes `NAME: {set: {H: V}, set_env: {H: ENV}, remove: [H]}`.
// A set_env variable must be set (an empty value is allowed: a header that
// is deliberately empty); its value is never echoed in an error.
func (l *loader) headerRules(parent object, name string) HeaderRules {
	var r HeaderRules
	n := parent.get(name)
	if n == nil {
		return r
	}
	o := l.object(n, parent.field(name), keyLine(parent, name), headerRulesSection().names()...)
	seen := map[string]string{} // canonical name → field that set it
	add := func(e entry, path, value string, secret bool) {
		h := textproto.CanonicalMIMEHeaderKey(e.name)
		if first, dup := seen[h]; dup {
			l.errorf(e.key, path, "header %s is already set by %s", h, first)
			return
		}
		seen[h] = path
		r.Set = append(r.Set, HeaderValue{Name: h, Value: value, Secret: secret})
	}
	for _, e := range l.entries(o.get("set"), o.field("set")) {
		path := join(o.field("set"), e.name)
		v, ok := l.str(e.val, path)
		if !ok || !l.headerName(e, path) {
			continue
		}
		if !validHeaderValue(v) {
			l.errorf(e.val, path, "a header value must not hold CR, LF or NUL")
			continue
		}
		add(e, path, v, false)
	}
	for _, e := range l.entries(o.get("set_env"), o.field("set_env")) {
		path := join(o.field("set_env"), e.name)
		env, ok := l.str(e.val, path)
		if !ok || !l.headerName(e, path) {
			continue
		}
		v, set := os.LookupEnv(env)
		switch {
		case env == "":
			l.errorf(e.val, path, "want the name of an environment variable")
		case !set:
			if l.missingEnv(e.val, path, env, v, set) {
				add(e, path, "x", true)
			}
		case !validHeaderValue(v):
			l.errorf(e.val, path, "environment variable %s holds CR, LF or NUL", env)
		default:
			add(e, path, v, true)
		}
	}
	if rn := o.get("remove"); rn != nil {
		items, vals, _ := l.strings(rn, o.field("remove"), true)
		for i, v := range vals {
			if !validToken(v) {
				l.errorf(items[i], index(o.field("remove"), i), "%q is not a header name", v)
				continue
			}
			r.Remove = append(r.Remove, textproto.CanonicalMIMEHeaderKey(v))
		}
	}
	return r
}

// headerName checks e's name as a header field name (RFC 9110 §5.1).
func (l *loader) headerName(e entry, path string) bool {
	if !validToken(e.name) {
		l.errorf(e.key, path, "%q is not a header name", e.name)
		return false
	}
	return true
}

// validToken reports whether s is an RFC 9110 §5.6.2 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can be sent as a field value
// (RFC 9110 §5.5: no CR, LF or NUL).
func validHeaderValue(s string) bool { return !strings.ContainsAny(s, "\r\n\x00") }
