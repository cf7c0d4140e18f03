package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"rlproxy/internal/testutil/rlproxytest"
)

// TestIETFDraft11Fields: with response.partition_key and problem_types:
// ietf, a real structured-field parser (RFC 9651, github.com/dunglas/
// httpsfv) accepts RateLimit-Policy and RateLimit with the draft-11
// parameters: qu="concurrent-requests" on the concurrency policy, pk a
// 16-byte Byte Sequence on every member, the same in both fields and on
// every response, different per policy, never the client's address or
// key. The 429 carries the draft's problem type and violated-policies.
func TestIETFDraft11Fields(t *testing.T) {
	for _, st := range e2eStores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			in, _ := e2eStart(t, st, `
response: { partition_key: true, problem_types: ietf }
upstreams: { app: { url: %q } }
policies:
  tb: { algorithm: token_bucket, rate: 1r/m, burst: 2, key: ip }
  cc: { algorithm: concurrency, limit: 2, key: ip }
  mo: { algorithm: sliding_window, limit: 100, calendar: month, timezone: Europe/Berlin, key: "header:X-Key" }
routes:
  - { name: r, match: { path_prefix: /r/ }, upstream: app, policies: [tb, cc, mo] }
`)
			var firstPK map[string][]byte
			for i := range 3 {
				resp, body := rlproxytest.Get(t, nil, in.URL+"/r/x", "X-Key", "secret-key-123")
				pol, rl := resp.Header.Values("RateLimit-Policy"), resp.Header.Values("RateLimit")
				raw := strings.Join(append(pol, rl...), " ")
				if strings.Contains(raw, "127.0.0.1") || strings.Contains(raw, "secret-key-123") {
					t.Fatalf("a raw client id in %q", raw)
				}
				policies, err := httpsfv.UnmarshalList(pol)
				if err != nil {
					t.Fatalf("RateLimit-Policy %q: %v", pol, err)
				}
				limits, err := httpsfv.UnmarshalList(rl)
				if err != nil {
					t.Fatalf("RateLimit %q: %v", rl, err)
				}
				if len(policies) != 3 || len(limits) != 3 {
					t.Fatalf("members: %q, %q", pol, rl)
				}
				pks := map[string][]byte{}
				for j, m := range policies {
					p, l := m.(httpsfv.Item), limits[j].(httpsfv.Item)
					name := p.Value.(string)
					if l.Value.(string) != name {
						t.Fatalf("member %d: %v vs %v", j, p.Value, l.Value)
					}
					for _, k := range []string{"q", "w"} {
						if v, ok := p.Params.Get(k); !ok || v.(int64) < 1 {
							t.Errorf("%s %s = %v", name, k, v)
						}
					}
					for _, k := range []string{"r", "t"} {
						if v, ok := l.Params.Get(k); !ok || v.(int64) < 0 {
							t.Errorf("%s %s = %v", name, k, v)
						}
					}
					qu, hasQU := p.Params.Get("qu")
					if (name == "cc") != hasQU || (hasQU && qu.(string) != "concurrent-requests") {
						t.Errorf("%s qu = %v, %v", name, qu, hasQU)
					}
					pk, _ := p.Params.Get("pk")
					pk2, _ := l.Params.Get("pk")
					b, ok := pk.([]byte)
					if !ok || len(b) != 16 || !bytes.Equal(b, pk2.([]byte)) {
						t.Errorf("%s pk %v (RateLimit %v): want one 16-byte Byte Sequence", name, pk, pk2)
					}
					pks[name] = b
				}
				if bytes.Equal(pks["tb"], pks["cc"]) || bytes.Equal(pks["tb"], pks["mo"]) {
					t.Errorf("partition keys not per policy: %v", pks)
				}
				if i == 0 {
					firstPK = pks
				} else if !bytes.Equal(firstPK["mo"], pks["mo"]) {
					t.Errorf("pk changed between responses: %v, %v", firstPK, pks)
				}
				if i < 2 {
					if resp.StatusCode != 200 {
						t.Fatalf("request %d: %d", i, resp.StatusCode)
					}
					continue
				}
				var prob struct {
					Type     string   `json:"type"`
					Violated []string `json:"violated-policies"`
				}
				if err := json.Unmarshal([]byte(body), &prob); err != nil || resp.StatusCode != 429 {
					t.Fatalf("third: %d %s %v", resp.StatusCode, body, err)
				}
				if prob.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || len(prob.Violated) != 1 || prob.Violated[0] != "tb" {
					t.Errorf("problem %+v", prob)
				}
			}
		})
	}
}
