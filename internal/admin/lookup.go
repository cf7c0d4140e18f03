package admin

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"rlproxy/internal/config"
	"rlproxy/internal/policy"
	"rlproxy/internal/proxy"
	"rlproxy/internal/reqview"
)

// lookupView is the quota lookup form and, when asked, its answer.
type lookupView struct {
	Route, Key, IP string
	Asked          bool
	Error          string
	Rows           []quotaRow
}

// quotaRow is one policy's quota for the looked-up client.
type quotaRow struct {
	Policy, Client             string
	Limit, Remaining, ResetSec int64
	// NoIP marks an IP-keyed policy looked up without an address.
	NoIP bool
}

// lookup computes the quota of the client named by key (an IP address or
// a credential such as an API key) and ip (its address, when key is a
// credential) on route, as the quota endpoint does: Peek, nothing spent.
func (p *page) lookup(ctx context.Context, rt *proxy.Runtime, q url.Values) lookupView {
	v := lookupView{Route: q.Get("route"), Key: q.Get("key"), IP: q.Get("ip")}
	if v.Route == "" && v.Key == "" && v.IP == "" {
		return v
	}
	v.Asked = true
	var route *policy.Route
	for _, r := range rt.Limiter.Routes() {
		if r.Name == v.Route {
			route = r
		}
	}
	if route == nil {
		v.Error = "unknown route"
		return v
	}
	ip, err := lookupIP(v.Key, v.IP)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if a, err := netip.ParseAddr(strings.TrimSpace(v.Key)); err != nil || a.Unmap() != ip {
		withCredential(r, rt.Config, v.Key)
	}
	// The key sources read the view's headers, query and TLS state.
	rv := reqview.View{Method: r.Method, Header: reqview.StdHeaders(r.Header), Query: r.URL.RawQuery}
	ans := rt.Quota(ctx, []*policy.Route{route}, &rv, ip, new(policy.Result))
	for _, qp := range ans.Policies {
		v.Rows = append(v.Rows, quotaRow{Policy: qp.Name, Client: p.display(rt.Config, qp.Client),
			Limit: qp.Limit, Remaining: qp.Remaining, ResetSec: qp.Reset,
			NoIP: ip.IsUnspecified() && strings.HasPrefix(qp.Client, "ip:")})
	}
	if len(v.Rows) == 0 {
		v.Error = "no policy of this route applies to this client, or the store did not answer"
	}
	return v
}

// lookupError is a mistake in the lookup form, shown next to it.
type lookupError string

func (e lookupError) Error() string { return string(e) }

// lookupIP is the client address: key itself when it is one, else ip, else
// the unspecified address (IP-keyed policies then show that address).
func lookupIP(key, ip string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.TrimSpace(key)); err == nil && ip == "" {
		return a.Unmap(), nil
	}
	if ip == "" {
		return netip.IPv4Unspecified(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return netip.Addr{}, lookupError("IP: want an IPv4 or IPv6 address")
	}
	return a.Unmap(), nil
}

// withCredential puts value in every header, query parameter and cookie
// any policy or plan of cfg reads a client id from, so the request is the
// one that client would send whatever source its policies use. JWT claims
// cannot be made up this way and are left out.
func withCredential(r *http.Request, cfg *config.Config, value string) {
	q := r.URL.Query()
	add := func(k config.KeySpec) {
		for _, s := range k.Sources {
			switch s.Kind {
			case config.SourceHeader:
				r.Header.Set(s.Name, value)
			case config.SourceQuery:
				q.Set(s.Name, value)
			case config.SourceCookie:
				r.AddCookie(&http.Cookie{Name: s.Name, Value: value, Quoted: false})
			}
		}
	}
	for _, name := range cfg.PolicyOrder {
		add(cfg.Policies[name].Key)
	}
	for _, pl := range cfg.Plans {
		add(pl.Key)
	}
	r.URL.RawQuery = q.Encode()
}

// display is how the page shows a client id: as the refusal log does
// (clientkey.Display), addresses hashed unless admin.show_client_ips.
func (p *page) display(cfg *config.Config, id string) string {
	return p.clients.Show(id, cfg.Admin.ShowClientIPs)
}
