package config

import (
	"strings"
	"testing"

	"rlproxy/internal/algo"
)

func parsePolicy(t *testing.T, policy string) (*Config, error) {
	t.Helper()
	src := "upstreams:\n  app: { builtin: echo }\npolicies:\n  p:\n    " + policy + "\nroutes:\n  - name: r\n    upstream: app\n    policies: [p]\n"
	return ParseWith("x.yaml", []byte(src), LoadOptions{})
}

// TestCalendarFields: calendar and timezone on the windows, their
// defaults (UTC) and their errors, each naming file:line:field.
func TestCalendarFields(t *testing.T) {
	cfg, err := parsePolicy(t, "algorithm: sliding_window\n    limit: 1000000\n    calendar: month\n    timezone: Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Policies["p"].Limit
	if l.Calendar == nil || l.Calendar.Unit != algo.Month || l.Calendar.Loc.String() != "Europe/Berlin" || l.Period != l.Calendar.Longest() {
		t.Fatalf("limit %+v", l)
	}
	cfg, err = parsePolicy(t, "algorithm: fixed_window\n    limit: 10\n    calendar: week")
	if err != nil || cfg.Policies["p"].Limit.Calendar.Loc.String() != "UTC" {
		t.Fatalf("default zone: %v %v", cfg, err)
	}
	for _, c := range []struct{ policy, want string }{
		{"algorithm: fixed_window\n    limit: 5\n    calendar: fortnight", `x.yaml:7: policies.p.calendar: "fortnight": want day, week, month or year`},
		{"algorithm: fixed_window\n    limit: 5\n    calendar: day\n    window: 24h", `x.yaml:8: policies.p.window: set window or calendar, not both`},
		{"algorithm: fixed_window\n    limit: 5\n    calendar: day\n    timezone: Mars/Olympus", `x.yaml:8: policies.p.timezone: "Mars/Olympus": unknown time zone; want an IANA name such as Europe/Berlin or UTC`},
		{"algorithm: fixed_window\n    limit: 5\n    window: 1h\n    timezone: UTC", `x.yaml:8: policies.p.timezone: applies only with calendar: day, week, month or year`},
		{"algorithm: sliding_log\n    limit: 5\n    calendar: day", `x.yaml:7: policies.p.calendar: field "calendar" does not apply to algorithm sliding_log (it takes limit, window)`},
		{"algorithm: fixed_window\n    calendar: day", `x.yaml:4: policies.p.limit: required for fixed_window: requests per calendar period, at least 1`},
	} {
		_, err := parsePolicy(t, c.policy)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %s", c.policy, err, c.want)
		}
	}
}
