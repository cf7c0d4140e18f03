package config

import (
	"strings"
	"testing"
	"time"
)

// TestPenaltyAndControl: penalty and control decode, and their mistakes
// name file:line and the field.
func TestPenaltyAndControl(t *testing.T) {
	const win = "algorithm: fixed_window\n    limit: 3\n    window: 1m\n    "
	cfg, err := ParseWith("x.yaml", []byte(settleYAML(win+"penalty: { after: 20, within: 10s, for: 1h }")), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Policies["p"].Penalty; p == nil || *p != (Penalty{After: 20, Within: 10 * time.Second, For: time.Hour}) {
		t.Fatalf("penalty %+v", p)
	}
	for _, tt := range []struct{ name, yml, want string }{
		{"missing for", settleYAML(win + "penalty: { after: 2, within: 10s }"), `x.yaml:8: policies.p.penalty.for: required: how long the box refuses the client`},
		{"after 0", settleYAML(win + "penalty: { after: 0, within: 10s, for: 1m }"), `x.yaml:8: policies.p.penalty.after: 0: want a whole number from 1 to 100000`},
		{"within too long", settleYAML(win + "penalty: { after: 2, within: 400d, for: 1m }"), `x.yaml:8: policies.p.penalty.within`},
		{"state file with valkey", "store: { type: valkey, valkey: { addrs: [\"127.0.0.1:1\"] } }\ncontrol: { state_file: x.json }\n" + settleYAML(win), `x.yaml:2: control.state_file: applies to the memory store only`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith("x.yaml", []byte(tt.yml), LoadOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}
