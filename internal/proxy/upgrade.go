package proxy

import (
	"net/http"
	"strings"
)

// upgrades is a route's allowlist of protocols a request may upgrade to
// (routes[].upgrades, lower case): "name" allows the protocol at any
// version, "name/version" that version alone (RFC 9110 §7.8 protocol
// tokens, compared case-insensitively).
type upgrades []string

// allows reports whether protocol (a member of an Upgrade field, as the
// client sent it) is on the list.
func (a upgrades) allows(protocol string) bool {
	name, _, _ := strings.Cut(protocol, "/")
	for _, p := range a {
		if strings.EqualFold(p, protocol) || strings.IndexByte(p, '/') < 0 && strings.EqualFold(p, name) {
			return true
		}
	}
	return false
}

// screen returns r with its Upgrade field keeping only the protocols a
// allows. A protocol that is not listed — h2c above all: an upstream that
// switched to HTTP/2 would serve any number of requests through a tunnel
// the limiter never sees — is dropped as hop-by-hop, as nginx does, so
// the upstream never switches; without a protocol left the request is an
// ordinary one. r itself is not changed: a request whose protocols are all
// allowed (a WebSocket handshake) is returned as it is, any other gets a
// shallow copy with its own header.
func (a upgrades) screen(r *http.Request) *http.Request {
	var kept []string
	all := true
	for _, line := range r.Header["Upgrade"] {
		for p := range strings.SplitSeq(line, ",") {
			p = strings.Trim(p, " \t")
			switch {
			case p == "":
			case a.allows(p):
				kept = append(kept, p)
			default:
				all = false
			}
		}
	}
	if all {
		return r
	}
	out := r.WithContext(r.Context())
	out.Header = r.Header.Clone()
	if len(kept) == 0 {
		delete(out.Header, "Upgrade")
	} else {
		out.Header["Upgrade"] = []string{strings.Join(kept, ", ")}
	}
	return out
}

// closesUnlessSwitched reports whether r is an HTTP/1 request whose connection the
// listener cannot keep guarding once it is answered without a switch: one
// asking for an Upgrade or a CONNECT (package framing stops checking after
// either, since what follows a 101 or a 2xx to CONNECT is not HTTP/1), or
// one with an odd HTTP/1 version (HTTP/1.2 to 1.9, which net/http reads as
// HTTP/1.1). Its answer, unless a 101, closes the connection
// (record.final), so no byte after it is ever read as another request;
// nginx closes after its 400 to CONNECT too.
func closesUnlessSwitched(r *http.Request) bool {
	return r.ProtoMajor == 1 && (r.ProtoMinor > 1 || r.Header["Upgrade"] != nil || r.Method == http.MethodConnect)
}
