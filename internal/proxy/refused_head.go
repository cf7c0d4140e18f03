package proxy

import (
	"net/netip"
	"strconv"

	"rlproxy/internal/h1"
)

// RefusedHead is the whole answer to a request head the HTTP/1.1 engine
// refused for why (h1.Server.Refused; docs/ENGINE.md lists the rules):
// 400 problem+json naming the rule, with "Connection: close", as nginx
// answers a malformed request and closes. It is counted in
// rlproxy_bad_requests_total under why's label. No route saw the request,
// so its body has no instance or request id.
func (s *Server) RefusedHead(why h1.Reason, _ netip.AddrPort) []byte {
	s.metrics.BadRequests(why.String()).Inc()
	body := append(make([]byte, 0, 192), `{"type":"urn:rlproxy:problem:bad-request","title":"Bad Request","status":400,"detail":`...)
	body = appendJSONString(body, "the request head breaks RFC 9112 ("+why.String()+")")
	body = append(body, "}\n"...)
	out := append(make([]byte, 0, 160+len(body)), "HTTP/1.1 400 Bad Request\r\n"+
		"Content-Type: application/problem+json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}
