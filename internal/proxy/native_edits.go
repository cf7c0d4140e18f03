package proxy

import "rlproxy/internal/h1"

// requestEdits prepares n.edits, the changes to the client's head on its
// way to nr's upstream, as rewrite (upstream.go) and headerEdit make them
// on the std path: the Host policy; X-Forwarded-For (a trusted peer's
// chain plus the peer, else the peer alone), X-Forwarded-Host and
// X-Forwarded-Proto replacing the client's; X-Real-IP the resolved client
// (dropped when there is none); Forwarded dropped; a new X-Request-Id; an
// untrusted peer's priority header dropped; then request_headers (remove,
// set). Values are built in n.vals and live until the request ends. When
// nr.hostUpstream, n.set[0] is Host, filled per server (forwardH1).
func (n *nativeCall) requestEdits(rt *Runtime, nr *nativeRoute) {
	v := &n.rc.view
	peer, client := v.Peer.Addr().Unmap(), n.rc.up.ClientIP
	b := rt.realIP.AppendForwardedFor(n.vals[:0], peer, v.Header)
	xff := len(b)
	if client.IsValid() {
		b = client.AppendTo(b)
	}
	n.vals = b
	all := bytesString(b)
	set := n.set[:0]
	switch {
	case nr.hostUpstream:
		set = append(set, h1.FieldEdit{Name: "Host"})
	case nr.host != "":
		set = append(set, h1.FieldEdit{Name: "Host", Value: nr.host})
	}
	if nr.xff {
		set = append(set, h1.FieldEdit{Name: "X-Forwarded-For", Value: all[:xff]})
	}
	if nr.xfh {
		set = append(set, h1.FieldEdit{Name: "X-Forwarded-Host", Value: v.RawHost})
	}
	if nr.xfp {
		proto := protoHTTP
		if v.TLS != nil {
			proto = protoHTTPS
		}
		set = append(set, h1.FieldEdit{Name: "X-Forwarded-Proto", Value: proto})
	}
	drop := append(n.drop[:0], nr.reqDrop...)
	if nr.xri && client.IsValid() {
		set = append(set, h1.FieldEdit{Name: "X-Real-Ip", Value: all[xff:]})
	} else if nr.xri {
		drop = append(drop, "X-Real-Ip")
	}
	if n.newID {
		set = append(set, h1.FieldEdit{Name: "X-Request-Id", Value: n.rc.requestID})
	}
	if name := rt.Config.Server.PriorityHeader; name != "" && !rt.realIP.Trusted(peer) {
		drop = append(drop, name)
	}
	n.set, n.drop = append(set, nr.reqSet...), drop
	n.edits = h1.Edits{Drop: n.drop, Set: n.set}
}
