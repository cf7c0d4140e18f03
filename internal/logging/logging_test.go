package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"rlproxy/internal/config"
)

func TestNewFormatAndLevel(t *testing.T) {
	var text, js bytes.Buffer
	New(config.Log{Level: slog.LevelWarn, Format: "text"}, &text, nil).Info("hidden")
	New(config.Log{Level: slog.LevelWarn, Format: "text"}, &text, nil).Warn("shown", "k", 1)
	if got := text.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "level=WARN msg=shown k=1") {
		t.Errorf("text output %q", got)
	}
	New(config.Log{Level: slog.LevelDebug, Format: "json"}, &js, nil).Debug("d", "k", "v")
	var line map[string]any
	if err := json.Unmarshal(js.Bytes(), &line); err != nil {
		t.Fatalf("json output %q: %v", js.String(), err)
	}
	if line["level"] != "DEBUG" || line["msg"] != "d" || line["k"] != "v" {
		t.Errorf("json line %v", line)
	}
}

// TestSamplerSteps: cap 2 per second, refusals at fixed instants.
func TestSamplerSteps(t *testing.T) {
	t0 := time.Unix(1_000_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		now        time.Time
		ok         bool
		suppressed uint64
	}{
		{at(0), true, 0},
		{at(10), true, 0},
		{at(20), false, 0}, // cap reached in second 0
		{at(500), false, 0},
		{at(999), false, 0},
		{at(1000), true, 3}, // new second: the three dropped are reported once
		{at(1001), true, 0},
		{at(1002), false, 0},
		{at(5000), true, 1}, // a gap of seconds: the pending count waits for the next line
		{at(4000), true, 0}, // a step back in wall time is a new window, not a panic
	}
	s := NewRefusalSampler(slog.New(slog.DiscardHandler), 2)
	for i, st := range steps {
		ok, n := s.Allow(st.now)
		if ok != st.ok || n != st.suppressed {
			t.Fatalf("step %d (+%v): Allow = %v, %d; want %v, %d",
				i, st.now.Sub(t0), ok, n, st.ok, st.suppressed)
		}
	}
}

func TestSamplerLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := New(config.Log{Format: "text"}, &buf, nil)
	s := NewRefusalSampler(log, 3)
	t0 := time.Unix(1_000_000_000, 0)
	ctx := context.Background()
	for i := range 10 { // 3 logged, 7 suppressed
		s.LogAt(ctx, t0.Add(time.Duration(i)*time.Millisecond), "refused", "route", "api")
	}
	s.LogAt(ctx, t0.Add(time.Second), "refused", "route", "login")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), buf.String())
	}
	for _, l := range lines[:3] {
		if !strings.HasSuffix(l, `msg=refused route=api`) {
			t.Errorf("line %q", l)
		}
	}
	if !strings.HasSuffix(lines[3], `msg=refused route=login suppressed=7`) {
		t.Errorf("line %q, want suppressed=7", lines[3])
	}
}

func TestSamplerZeroLogsNone(t *testing.T) {
	s := NewRefusalSampler(slog.New(slog.DiscardHandler), 0)
	for i := range 3 {
		if ok, _ := s.Allow(time.Unix(int64(i), 0)); ok {
			t.Fatalf("perSecond 0 allowed a line at %d s", i)
		}
	}
}

// TestSamplerConcurrent: 8 goroutines refuse 1,000 times each within one
// second; exactly the cap is logged and every other one is suppressed.
func TestSamplerConcurrent(t *testing.T) {
	s := NewRefusalSampler(slog.New(slog.DiscardHandler), 10)
	now := time.Unix(1_000_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if ok, _ := s.Allow(now); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 10 {
		t.Errorf("allowed %d, want 10", allowed)
	}
	if ok, n := s.Allow(now.Add(time.Second)); !ok || n != 7990 {
		t.Errorf("next second: %v, suppressed=%d; want true, 7990", ok, n)
	}
}

// TestLevelVar: a reload that sets the LevelVar changes what is logged
// without a new logger.
func TestLevelVar(t *testing.T) {
	var buf bytes.Buffer
	var lv slog.LevelVar
	log := New(config.Log{Level: slog.LevelWarn, Format: "text"}, &buf, &lv)
	log.Info("before")
	lv.Set(slog.LevelInfo)
	log.Info("after")
	if out := buf.String(); strings.Contains(out, "before") || !strings.Contains(out, "after") {
		t.Fatalf("log = %q, want only the line after the level change", out)
	}
}
