package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// topSection is the table of the top-level mapping. Fields decode in table
// order: upstreams and policies before the plans that name them, whatever
// their order in the file; routes, which name all three, in the check.
func (l *loader) topSection() *section {
	c := l.c
	return &section{
		fields: []field{
			{name: "listen", def: `":8080"`, value: l.listenVal(&c.Listen),
				doc: `Public listener, HOST:PORT; "" turns it off (decision-service mode: routes need no upstream). Flag -listen and RLPROXY_LISTEN override it.`},
			{name: "admin_listen", def: `"127.0.0.1:9090"`, value: l.listenVal(&c.AdminListen),
				doc: `Admin listener (/metrics, /healthz, /readyz), HOST:PORT, never the public port; "" turns it off. Flag -admin-listen and RLPROXY_ADMIN_LISTEN override it.`},
			{name: "tls", sub: l.tlsSection(), doc: "Serve the public listener over HTTPS with this PEM certificate and key (paths relative to this file; reloaded with the config), with certificates obtained by acme, or both."},
			{name: "log", sub: l.logSection(), doc: "Process log on stderr."},
			{name: "server", sub: l.serverSection(), doc: "Listener timeouts and the shaping caps."},
			{name: "store", sub: l.storeSection(), doc: "Where limiter state lives: memory (one instance) or valkey (shared)."},
			{name: "real_ip", sub: l.realIPSection(), doc: "nginx realip: which header carries the client address, from which proxies."},
			{name: "jwt", sub: l.jwtSection(), doc: "Verification of the tokens jwt:CLAIM key sources read."},
			{name: "response", sub: l.responseSection(), doc: "How refusals look."},
			{name: "quota_endpoint", sub: l.quotaSection(), doc: "Present: GET path answers the caller's quota as JSON without spending it."},
			{name: "admin", sub: l.adminSection(), doc: "The admin page served on admin_listen."},
			{name: "upstreams", doc: "Upstreams by name: where routes send requests.", value: value{set: l.upstreams,
				shape: func() schema { return namedShape(objectShape(l.upstreamSection(&Upstream{})), "") }}},
			{name: "policies", doc: "Policies by name: one limit each.", value: value{set: l.policies,
				shape: func() schema { return namedShape(objectShape(l.policySection(&Policy{})), validNamePattern) }}},
			{name: "plans", doc: "Plans by name: a credential picks a plan, a plan a list of policies.", value: value{set: l.plansMap,
				shape: func() schema { return namedShape(objectShape(l.plansSection(&Plans{}, 0)), "") }}},
			{name: "routes", need: "required", doc: "Routes in order: the first that matches a request serves it; no match is 404.",
				value: checked(func() schema {
					return schema{"type": "array", "minItems": 1, "items": objectShape(l.routeSection(&Route{}, nil))}
				})},
			{name: "forward_auth", value: checked(func() schema { return objectShape(forwardAuthSection()) }),
				doc: "Forward-auth decision listener: answers whether a request another proxy describes may pass."},
			{name: "envoy_rls", value: checked(func() schema { return objectShape(envoyRLSSection()) }),
				doc: "Envoy rate limit service (gRPC): descriptors mapped to policies."},
			{name: "tracing", sub: l.tracingSection(), doc: "OpenTelemetry traces exported over OTLP; absent: off."},
			{name: "control", sub: l.controlSection(), doc: "Entries (bans, exemptions, overrides) set through the admin API while serving: their bound and, with the memory store, their state file."},
		},
		check: l.topCheck,
		extend: func(s schema) {
			// Without a public listener (decision-service mode) routes
			// need no upstream; with one, each does.
			s["if"] = schema{"properties": schema{"listen": schema{"const": ""}}, "required": []any{"listen"}}
			s["else"] = schema{"properties": schema{"routes": schema{"items": schema{"required": []any{"upstream"}}}}}
		},
	}
}

// topCheck applies the overrides and decodes what spans the file: the
// listeners' clash, the routes (which name upstreams, policies and plans),
// the decision interfaces (which name routes and policies) and the
// warnings about keys.
func (l *loader) topCheck(o object) {
	c := l.c
	l.override(l.opts.Overrides.Listen, "listen", &c.Listen)
	l.override(l.opts.Overrides.AdminListen, "admin_listen", &c.AdminListen)
	c.ListenSource = l.source(l.opts.Overrides.Listen, o, "listen")
	c.AdminListenSource = l.source(l.opts.Overrides.AdminListen, o, "admin_listen")
	if c.Listen != "" && c.AdminListen != "" && samePort(c.Listen, c.AdminListen) {
		d, at := l.decoder, o.keys["admin_listen"]
		if ov := l.opts.Overrides.AdminListen; ov != nil {
			d, at = &decoder{file: ov.Source, errs: l.errs}, nil
		}
		d.errorf(at, "admin_listen", "%q: must not share the public listener %q (metrics and health stay off the public port)", c.AdminListen, c.Listen)
	}
	if !o.has("quota_endpoint") {
		c.QuotaEndpoint.Path = "" // absent: off
	}
	l.routes(o)
	l.integrations(o)
	l.warnCredentials(o)
	l.warnTLSKeys(o)
	l.checkACME(o)
	l.warnPriorityHeader(o)
}

// source says where a listener's value came from: ov, the file's field, or
// the default.
func (l *loader) source(ov *Override, o object, field string) string {
	switch {
	case ov != nil:
		return ov.Source
	case o.has(field):
		return fmt.Sprintf("file %s:%d", l.file, keyLine(o, field))
	}
	return "default"
}

// override replaces *dst with ov's value, checked as the file's would be;
// its problems name ov.Source ("flag -listen: listen: ...").
func (l *loader) override(ov *Override, field string, dst *string) {
	if ov == nil {
		return
	}
	d := &decoder{file: ov.Source, errs: l.errs}
	d.listenVal(dst).set(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ov.Value}, field)
}

// upstreams decodes `upstreams:`.
func (l *loader) upstreams(n *yaml.Node, path string) {
	for _, e := range l.entries(n, path) {
		l.c.Upstreams[e.name] = l.upstream(e)
	}
}

// policies decodes `policies:`, keeping their file order.
func (l *loader) policies(n *yaml.Node, path string) {
	for _, e := range l.entries(n, path) {
		l.c.Policies[e.name] = l.policy(e)
		l.c.PolicyOrder = append(l.c.PolicyOrder, e.name)
	}
}

// plansMap decodes `plans:`.
func (l *loader) plansMap(n *yaml.Node, path string) {
	for _, e := range l.entries(n, path) {
		l.c.Plans[e.name] = l.plans(e)
	}
}
