package deploy_test

// The monitoring kit: the alert rules pass promtool's checks and its unit
// tests (which fire and clear each alert), and the Grafana dashboard is a
// well-formed dashboard with the variables docs/reference/deployment.md names.

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
)

func TestAlertRules(t *testing.T) {
	promtool := needTool(t, "promtool", "apt-get install prometheus")
	for _, args := range [][]string{
		{"check", "rules", "prometheus/rlproxy-alerts.yaml"},
		{"test", "rules", "prometheus/rlproxy-alerts.test.yaml"},
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/rlproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/rlproxy.json: %v", err)
	}
	return &d
}

func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if d.UID != "rlproxy" || !slices.Contains(vars, "job") || !slices.Contains(vars, "route") {
		t.Errorf("uid %q, variables %v: want uid rlproxy and variables job, route", d.UID, vars)
	}
	jobRE := regexp.MustCompile(`job=~"\$job"`)
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !jobRE.MatchString(tg.Expr) {
				t.Errorf("panel %q: %q ignores the job variable", p.Title, tg.Expr)
			}
		}
	}
}
