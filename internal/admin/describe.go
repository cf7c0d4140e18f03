package admin

import (
	"fmt"
	"strings"

	"rlproxy/internal/config"
)

// routeView is one route as the page lists it.
type routeView struct {
	Name     string
	Match    string
	Upstream string
	Cost     int64
	Policies []policyView
	Plan     string
}

// policyView is one policy with its limit in words, e.g. "token bucket
// 10 r/s (burst 20), key ip, fail open".
type policyView struct {
	Name  string
	Limit string
	Key   string
	Fail  string
	Notes string
}

// describeRoutes lists cfg's routes in file order.
func describeRoutes(cfg *config.Config) []routeView {
	out := make([]routeView, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		v := routeView{Name: r.Name, Match: describeMatch(r.Match), Upstream: r.Upstream, Cost: r.Cost}
		for _, name := range r.Policies {
			if p := cfg.Policies[name]; p != nil {
				v.Policies = append(v.Policies, describePolicy(p))
			}
		}
		if pl := cfg.Plans[r.Plan]; pl != nil {
			v.Plan = fmt.Sprintf("%s (key %s, default plan %s)", pl.Name, describeKey(pl.Key), pl.Default)
		}
		out = append(out, v)
	}
	return out
}

func describeMatch(m config.Match) string {
	var parts []string
	if len(m.Methods) > 0 {
		parts = append(parts, strings.Join(m.Methods, "|"))
	}
	if m.Host != "" {
		parts = append(parts, "host "+m.Host)
	}
	switch {
	case m.Path != "":
		parts = append(parts, "path "+m.Path)
	case m.PathPrefix != "":
		parts = append(parts, "prefix "+m.PathPrefix)
	case m.PathRegex != nil:
		parts = append(parts, "regex "+m.PathRegex.String())
	}
	if len(parts) == 0 {
		return "every request"
	}
	return strings.Join(parts, ", ")
}

func describePolicy(p *config.Policy) policyView {
	v := policyView{Name: p.Name, Limit: p.Limit.String(), Key: describeKey(p.Key), Fail: "fail open"}
	if p.OnStoreError == config.FailClosed {
		v.Fail = "fail closed"
	} else if p.Fallback != nil {
		v.Fail = "fail open to " + p.Fallback.String()
	}
	var notes []string
	if p.DryRun {
		notes = append(notes, "dry run")
	}
	if len(p.Exempt) > 0 {
		notes = append(notes, fmt.Sprintf("%d exempt prefixes", len(p.Exempt)))
	}
	v.Notes = strings.Join(notes, ", ")
	return v
}

// describeKey spells a key spec as the configuration does ("ip",
// "header:X-API-Key, ip").
func describeKey(k config.KeySpec) string {
	var parts []string
	for _, s := range k.Sources {
		switch s.Kind {
		case config.SourceIP:
			parts = append(parts, "ip")
		case config.SourceGlobal:
			parts = append(parts, "global")
		case config.SourceHeader:
			parts = append(parts, "header:"+s.Name)
		case config.SourceQuery:
			parts = append(parts, "query:"+s.Name)
		case config.SourceCookie:
			parts = append(parts, "cookie:"+s.Name)
		case config.SourceJWT:
			parts = append(parts, "jwt:"+s.Name)
		case config.SourceTLS:
			parts = append(parts, "tls:"+s.Name)
		}
	}
	if len(parts) == 0 {
		return "ip"
	}
	sep := ", "
	if k.Combine {
		sep = " + "
	}
	return strings.Join(parts, sep)
}
