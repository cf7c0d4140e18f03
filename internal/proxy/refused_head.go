package proxy

import (
	"net/netip"
	"strconv"

	"rlproxy/internal/h1"
)

// RefusedHead is the whole answer to a request head the HTTP/1.1 engine
// refused for why (h1.Server.Refused; docs/ENGINE.md lists the rules):
// 400 problem+json naming the rule, with "Connection: close", as nginx
// answers a malformed request and closes; a head or a line over its limit
// is 431 (RFC 6585 §5), as net/http answers one over max_header_bytes. It
// is counted in rlproxy_bad_requests_total under why's label. No route saw
// the request, so its body has no instance or request id.
func (s *Server) RefusedHead(why h1.Reason, _ netip.AddrPort) []byte {
	s.metrics.BadRequests(why.String()).Inc()
	status, typ, detail := "400 Bad Request", "bad-request", "the request head breaks RFC 9112 ("+why.String()+")"
	if why == h1.HeadTooLarge || why == h1.LineTooLong {
		status, typ, detail = "431 Request Header Fields Too Large", "header-too-large",
			"the request head is over server.max_header_bytes, or a line of it over 64 KiB ("+why.String()+")"
	}
	body := append(make([]byte, 0, 192), `{"type":"urn:rlproxy:problem:`...)
	body = append(body, typ...)
	body = append(body, `","title":`...)
	body = appendJSONString(body, status[4:])
	body = append(body, `,"status":`...)
	body = append(body, status[:3]...)
	body = append(body, `,"detail":`...)
	body = appendJSONString(body, detail)
	body = append(body, "}\n"...)
	out := append(make([]byte, 0, 160+len(body)), "HTTP/1.1 "...)
	out = append(out, status...)
	out = append(out, "\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}
