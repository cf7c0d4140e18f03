package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"

	"rlproxy/internal/algo"
	"rlproxy/internal/config"
	"rlproxy/internal/live"
	"rlproxy/internal/policy"
	"rlproxy/internal/reqview"
	"rlproxy/internal/store"
	"rlproxy/internal/store/memory"
)

// quotaEndpoint answers GET quota_endpoint.path with the caller's quota on
// every policy that applies to it, without charging any of them. It is
// itself limited per client IP by a local token bucket, so polling it
// cannot load the store.
type quotaEndpoint struct {
	path  string
	limit algo.Limit
	local *memory.Store
}

func newQuotaEndpoint(cfg *config.Config) *quotaEndpoint {
	return &quotaEndpoint{
		path:  cfg.QuotaEndpoint.Path,
		limit: cfg.QuotaEndpoint.Limit,
		local: memory.New(memory.Options{MaxKeys: 100_000}),
	}
}

// QuotaPolicy is one policy in the quota endpoint's answer: Limit and
// Remaining in requests, Reset and Window in seconds.
type QuotaPolicy struct {
	Name      string `json:"name"`
	Route     string `json:"route"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Reset     int64  `json:"reset"`
	Window    int64  `json:"window"`
	// Client is the policy's client id for the request (a credential's is
	// hashed); not served by the quota endpoint, shown by the admin page.
	Client string `json:"-"`
}

// QuotaAnswer is the quota endpoint's body: the binding policy's figures at the
// top (as docs/CONTRACT.md's example `{"limit":100,"remaining":45,"reset":3540}`),
// then every policy.
type QuotaAnswer struct {
	Limit     int64         `json:"limit"`
	Remaining int64         `json:"remaining"`
	Reset     int64         `json:"reset"`
	Policies  []QuotaPolicy `json:"policies"`
}

func (s *Server) serveQuota(w http.ResponseWriter, r *http.Request, v *reqview.View, rt *Runtime, ip netip.Addr) {
	q := rt.quota
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, r, problemMethodNotAllowed, nil, nil)
		return
	}
	var d [1]algo.Decision
	ck := [1]store.Check{{Key: "quota:{" + ip.String() + "}", Limit: q.limit, Cost: 1}}
	if _, err := q.local.Decide(r.Context(), ck[:], 0, d[:]); err == nil && !d[0].Allowed {
		res := &policy.Result{RetryAfter: d[0].RetryAfter, Binding: -1}
		writeProblem(w, r, problemQuotaLimited, nil, res)
		return
	}
	routes, bad, ok := quotaRoutes(rt, r, v.Host)
	if !ok {
		writeProblem(w, r, bad, nil, nil)
		return
	}
	res := s.results.Get().(*policy.Result)
	defer s.results.Put(res)
	ans := rt.Quota(r.Context(), routes, v, ip, res)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(&ans)
}

// quotaRoutes is the routes the quota endpoint answers for: every route,
// or with ?path=P (and ?method=M, default GET) only the route a request for
// P on this Host would take (none when no route would), so the top-level
// figures are that route's binding policy rather than the tightest policy
// of any route. Without ok, bad is the problem to answer instead (400): a
// query that does not parse, M without P, P not starting with "/", or a P
// or M a request could not carry (reqview.Path, reqview.Method).
func quotaRoutes(rt *Runtime, r *http.Request, host string) (routes []*policy.Route, bad problemKind, ok bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	raw, m := q.Get("path"), q.Get("method")
	switch {
	case err != nil, raw == "" && m != "", raw != "" && raw[0] != '/':
		return nil, problemBadQuotaQuery, false
	case raw == "":
		return rt.Limiter.Routes(), 0, true
	case m == "":
		m = http.MethodGet
	case !reqview.Method(m):
		return nil, problemBadMethod, false
	}
	p, ok := reqview.Path(raw)
	if !ok {
		return nil, problemBadPath, false
	}
	if route := rt.Limiter.Match(&reqview.View{Method: m, Host: host, Path: p}); route != nil {
		return []*policy.Route{route}, 0, true
	}
	return nil, 0, true
}

// Quota is r's quota (from client address ip) on every policy of routes
// that applies to it, each policy once, with the binding one's figures at
// the top, without charging anything (Limiter.Peek): the quota endpoint's
// answer, and the admin page's quota lookup. res is scratch. Routes whose
// store cannot answer are left out.
func (rt *Runtime) Quota(ctx context.Context, routes []*policy.Route, v *reqview.View, ip netip.Addr, res *policy.Result) QuotaAnswer {
	ans := QuotaAnswer{Policies: []QuotaPolicy{}}
	seen := map[string]bool{}
	best, bestD := -1, algo.Decision{}
	for _, route := range routes {
		if !route.Limited() {
			continue
		}
		if err := rt.Limiter.Peek(ctx, route, v, ip, res); err != nil {
			continue
		}
		for i := range res.Items {
			it := &res.Items[i]
			if seen[it.Policy.Name] || res.KeyFor(i) == "" {
				continue
			}
			seen[it.Policy.Name] = true
			ans.Policies = append(ans.Policies, QuotaPolicy{
				Name: it.Policy.Name, Route: route.Name, Limit: it.Policy.Quota,
				Remaining: max(it.Decision.Remaining, 0), Reset: resetSeconds(it.Decision.ResetAfter), Window: it.Policy.WindowAt(res.Now),
				Client: live.ClientID(res.KeyFor(i)),
			})
			if best < 0 || policy.Binds(it.Decision, bestD) {
				best, bestD = len(ans.Policies)-1, it.Decision
			}
		}
	}
	if best >= 0 {
		b := ans.Policies[best]
		ans.Limit, ans.Remaining, ans.Reset = b.Limit, b.Remaining, b.Reset
	}
	return ans
}
