package config

// serverProxy decodes the protocol fields of `server:` (docs/CONTRACT.md):
// h2c, stream_idle_timeout and proxy_protocol: {trusted, required}.
func (l *loader) serverProxy(o object) {
	s := &l.c.Server
	if n := o.get("h2c"); n != nil {
		if v, ok := l.boolean(n, o.field("h2c")); ok {
			s.H2C = v
		}
	}
	if n := o.get("stream_idle_timeout"); n != nil {
		if v, ok := l.duration(n, o.field("stream_idle_timeout"), true); ok {
			s.StreamIdleTimeout = v
		}
	}
	n := o.get("proxy_protocol")
	if n == nil {
		return
	}
	path := o.field("proxy_protocol")
	p := l.object(n, path, keyLine(o, "proxy_protocol"), "trusted", "required")
	if p.bad {
		return
	}
	pp := &ProxyProtocol{Required: true}
	t := p.get("trusted")
	if t != nil {
		var ok bool
		if pp.Trusted, ok = l.prefixes(t, p.field("trusted")); !ok {
			return
		}
	}
	if len(pp.Trusted) == 0 {
		l.errorf(p.missing(), p.field("trusted"), "required: the addresses (CIDRs) of the load balancers that send PROXY headers")
		return
	}
	if r := p.get("required"); r != nil {
		if v, ok := l.boolean(r, p.field("required")); ok {
			pp.Required = v
		}
	}
	s.ProxyProtocol = pp
}
