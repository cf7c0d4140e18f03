package algo

import (
	"testing"
	"time"
)

// TestFormatDuration: durations read as an operator writes them in the
// config file, not as time.Duration prints them ("24h0m0s").
func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour:                  "24h",
		90 * time.Minute:                "1h30m",
		time.Hour + time.Second:         "1h0m1s",
		time.Minute:                     "1m",
		10 * time.Second:                "10s",
		500 * time.Millisecond:          "500ms",
		1500 * time.Millisecond:         "1.5s",
		0:                               "0s",
		8784*time.Hour + 30*time.Minute: "8784h30m",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
