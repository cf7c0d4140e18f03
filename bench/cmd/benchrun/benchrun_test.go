package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A comm with spaces and ')' must not shift the fields.
	line := "4242 (nginx: worker) x) S 4241 4241 4241 0 -1 4194624 120 0 0 0 1234 567 0 0 20 0 1 0 100 0 0\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4241 || st.ticks != 1234+567 {
		t.Fatalf("got ppid %d ticks %d, want 4241 1801", st.ppid, st.ticks)
	}
	if _, err := parseProcStat([]byte("1 (x) S 0")); err == nil {
		t.Fatal("short stat: want error")
	}
}

func TestParseBusyTicks(t *testing.T) {
	stat := "cpu  100 2 30 9999 7 4 5 6 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n"
	got, err := parseBusyTicks(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(100 + 2 + 30 + 4 + 5 + 6); got != want {
		t.Fatalf("got %d, want %d (idle and iowait excluded)", got, want)
	}
}

func TestCommandStats(t *testing.T) {
	before, err := parseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5,usec_per_call=0.5,rejected_calls=0,failed_calls=0\r\ncmdstat_info:calls=3,usec=1\r\n")
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=25,usec=9\r\ncmdstat_info:calls=9,usec=1\r\ncmdstat_eval:calls=2,usec=1\r\ncmdstat_get:calls=4,usec=1\r\n")
	if err != nil {
		t.Fatal(err)
	}
	d := diffStats(before, after)
	if want := (callDelta{EvalSHA: 15, Scripts: 17, All: 21}); d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	if m, err := parseCommandStats("# Commandstats\r\n"); err != nil || len(m) != 0 {
		t.Fatalf("fresh server: got %v, %v; want empty, nil", m, err)
	}
	if _, err := parseCommandStats("-ERR unknown\r\n"); err == nil {
		t.Fatal("not a commandstats reply: want error")
	}
}

func TestSplitDuration(t *testing.T) {
	tests := []struct {
		args     []string
		wantRest int
		want     time.Duration
	}{
		{[]string{"-t1", "-c32", "-d5s"}, 2, 5 * time.Second},
		{[]string{"-t1", "-d", "2m", "-c4"}, 2, 2 * time.Minute},
		{[]string{"--duration=3", "-c4"}, 1, 3 * time.Second},
		{[]string{"--duration", "7s"}, 0, 7 * time.Second},
		{[]string{"-c4"}, 1, 10 * time.Second}, // wrk's default
	}
	for _, tt := range tests {
		rest, d, err := splitDuration(tt.args)
		if err != nil || len(rest) != tt.wantRest || d != tt.want {
			t.Errorf("splitDuration(%q) = %q, %v, %v; want %d args, %v", tt.args, rest, d, err, tt.wantRest, tt.want)
		}
	}
	if _, _, err := splitDuration([]string{"-dfoo"}); err == nil {
		t.Error("-dfoo: want error")
	}
}

func TestWrkSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		500 * time.Millisecond: "1s", time.Second: "1s", 1500 * time.Millisecond: "2s", 5 * time.Second: "5s",
	} {
		if got := wrkSeconds(d); got != want {
			t.Errorf("wrkSeconds(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestParseWrkOutput(t *testing.T) {
	out := "Running 2s test\n  119449 requests in 2.00s\nBENCHJSON {\"requests\":1000,\"duration_us\":2000000,\"err_status\":3,\"err_read\":1,\"err_timeout\":2,\"p50_us\":420.0,\"p99_us\":5377.5}\n"
	r, err := parseWrkOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps() != 500 || r.ErrStatus != 3 || r.socketErrors() != 3 || r.P50us != 420 || r.P99us != 5377.5 {
		t.Fatalf("got %+v", r)
	}
	if _, err := parseWrkOutput("Running 2s test\n"); err == nil {
		t.Fatal("no BENCHJSON line: want error")
	}
}

func TestMedianAndPercentile(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v, want 2", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v, want 2.5", got)
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	if p95, p100 := percentile(lat, 95), percentile(lat, 100); p95 != 95 || p100 != 100 {
		t.Errorf("percentile = %v, %v; want 95, 100 (nearest rank)", p95, p100)
	}
}

func TestMedianSampleKeepsNil(t *testing.T) {
	one, three := 1.0, 3.0
	m := medianSample([]sample{{RPS: 10, ProxyCPUus: &one}, {RPS: 30, ProxyCPUus: &three}, {RPS: 20}})
	if m.RPS != 20 || m.ProxyCPUus == nil || *m.ProxyCPUus != 2 || m.StoreCPUus != nil {
		t.Fatalf("got %+v", m)
	}
}

func TestCPUCount(t *testing.T) {
	for list, want := range map[string]int{"0": 1, "0,1": 2, "0-3": 4, "0-1,4": 3} {
		if got := cpuCount(list); got != want {
			t.Errorf("cpuCount(%q) = %d, want %d", list, got, want)
		}
	}
}

func TestReached(t *testing.T) {
	before := map[string]int64{"good-01": 5, attackKey: 100}
	after := map[string]int64{"good-01": 9, "good-02": 3, attackKey: 130, "": 7}
	if g, a := reached(before, after); g != 7 || a != 30 {
		t.Fatalf("reached = %d, %d; want 7, 30", g, a)
	}
}

// TestConfigsRender checks that every config the harness uses exists and
// holds the default addresses it rewrites, so the files and the harness
// cannot drift apart.
func TestConfigsRender(t *testing.T) {
	dir := filepath.Join("..", "..", "configs")
	out := t.TempDir()
	// The throughput upstream holds only the upstream's address.
	if path, err := renderConfig(dir, upstreamConf, out, map[string]string{defaultUpstream: "127.0.0.1:2"}); err != nil {
		t.Errorf("%s: %v", upstreamConf, err)
	} else if b, _ := os.ReadFile(path); !strings.Contains(string(b), "listen 127.0.0.1:2;") {
		t.Errorf("%s: listen address not rewritten", upstreamConf)
	}
	for _, specs := range [][]targetSpec{throughputTargets(), attackTargets()} {
		for _, s := range specs {
			if s.conf == "" {
				continue
			}
			repl := map[string]string{defaultListen: "127.0.0.1:1", defaultUpstream: "127.0.0.1:2"}
			if s.valkey {
				repl[defaultValkey] = "127.0.0.1:3"
			}
			if s.admin {
				repl[defaultAdmin] = "127.0.0.1:4"
			}
			path, err := renderConfig(dir, s.conf, out, repl)
			if err != nil {
				t.Errorf("%s: %v", s.id, err)
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for from := range repl {
				if strings.Contains(string(b), from) {
					t.Errorf("%s: %s left in rendered config", s.id, from)
				}
			}
		}
	}
}
