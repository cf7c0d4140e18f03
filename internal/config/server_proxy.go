package config

import "gopkg.in/yaml.v3"

// proxyProtocolSection is `server.proxy_protocol:` (docs/CONTRACT.md):
// trusted is required and not empty; the section is set only when valid.
func (l *loader) proxyProtocolSection() *section {
	const needTrusted = "required: the addresses (CIDRs) of the load balancers that send PROXY headers"
	pp := &ProxyProtocol{}
	badTrusted := false
	trusted := value{func() schema { return listShape(stringShape(), false) }, func(n *yaml.Node, path string) {
		var ok bool
		pp.Trusted, ok = l.prefixes(n, path)
		badTrusted = !ok
	}}
	return &section{optional: true, fields: []field{
		{name: "trusted", need: needTrusted, value: trusted, doc: "Addresses or CIDRs of the peers whose PROXY header is read; another peer's connection that starts with one is closed."},
		{name: "required", def: "true", value: l.boolVal(&pp.Required), doc: "A trusted peer's connection without a PROXY header is closed; false accepts it with the peer as the client."},
	}, check: func(o object) {
		switch {
		case o.bad || badTrusted || !o.has("trusted"): // absence reported by the table
		case len(pp.Trusted) == 0:
			l.errorf(o.missing(), o.field("trusted"), "%s", needTrusted)
		default:
			l.c.Server.ProxyProtocol = pp
		}
	}}
}
