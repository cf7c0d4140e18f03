package reload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Real files, real inotify, real signals. Debounce is 150 ms; each test waits
// up to 3 s for the expected callback, then a further debounce + 250 ms to
// prove no extra one comes. Tests must not run in parallel: SIGHUP reaches
// every Watcher of the process.
const (
	debounce = 150 * time.Millisecond
	quiet    = debounce + 250*time.Millisecond
)

type harness struct {
	t       *testing.T
	w       *Watcher
	reasons chan string
}

func start(t *testing.T, path string, extra func() []string) *harness {
	t.Helper()
	h := &harness{t: t, reasons: make(chan string, 100)}
	w, err := New(Options{
		Path:     path,
		Extra:    extra,
		Debounce: debounce,
		Reload:   func(reason string) { h.reasons <- reason },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// expect waits for exactly n callbacks and returns their reasons.
func (h *harness) expect(n int) []string {
	h.t.Helper()
	var got []string
	deadline := time.After(3 * time.Second)
	for len(got) < n {
		select {
		case r := <-h.reasons:
			got = append(got, r)
		case <-deadline:
			h.t.Fatalf("got %d reload callbacks %q, want %d", len(got), got, n)
		}
	}
	select {
	case r := <-h.reasons:
		h.t.Fatalf("extra reload callback %q after %q", r, got)
	case <-time.After(quiet):
	}
	return got
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInPlaceWrite(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rlproxy.yaml")
	write(t, cfg, "a")
	h := start(t, cfg, nil)
	h.expect(0)

	write(t, cfg, "b")
	if got := h.expect(1); got[0] != "file changed: "+cfg {
		t.Errorf("reason %q", got[0])
	}
	// An unrelated file in the same directory is not a trigger.
	write(t, filepath.Join(dir, "other.yaml"), "x")
	h.expect(0)
	// chmod alone is not a change.
	if err := os.Chmod(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	h.expect(0)
}

func TestRenameReplace(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rlproxy.yaml")
	write(t, cfg, "a")
	h := start(t, cfg, nil)

	// How vim, emacs and `sed -i` save: a new inode renamed over the old.
	for i, content := range []string{"b", "c"} {
		tmp := filepath.Join(dir, ".rlproxy.yaml.swp")
		write(t, tmp, content)
		if err := os.Rename(tmp, cfg); err != nil {
			t.Fatal(err)
		}
		// The second replace proves the watch survived the first (an inode
		// watch would now follow the deleted file).
		if got := h.expect(1); got[0] != "file changed: "+cfg {
			t.Errorf("replace %d: reason %q", i, got[0])
		}
	}
}

// TestConfigMap mimics the kubelet's atomic writer: config.yaml →
// ..data/config.yaml, ..data → ..<timestamp>; an update writes a new
// timestamped directory, points ..data_tmp at it, renames ..data_tmp over
// ..data and removes the old directory.
func TestConfigMap(t *testing.T) {
	dir := t.TempDir()
	generation := func(name, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "config.yaml"), content)
	}
	swap := func(from, to string) {
		t.Helper()
		if err := os.Symlink(to, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, from)); err != nil {
			t.Fatal(err)
		}
	}
	generation("..2026_11_29_10_00_00.1", "a")
	if err := os.Symlink("..2026_11_29_10_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), cfg); err != nil {
		t.Fatal(err)
	}
	h := start(t, cfg, nil)

	// Preparing the next generation alone is not a change.
	generation("..2026_11_29_10_05_00.2", "b")
	h.expect(0)
	swap("..2026_11_29_10_00_00.1", "..2026_11_29_10_05_00.2")
	if got := h.expect(1); got[0] != "file changed: "+cfg {
		t.Errorf("reason %q", got[0])
	}
	// A second update proves the watches moved to the new generation.
	generation("..2026_11_29_10_10_00.3", "c")
	swap("..2026_11_29_10_05_00.2", "..2026_11_29_10_10_00.3")
	h.expect(1)
	if got, err := os.ReadFile(cfg); err != nil || string(got) != "c" {
		t.Fatalf("config now %q, %v", got, err)
	}
}

func TestExtraFiles(t *testing.T) {
	dir := t.TempDir()
	keysDir := filepath.Join(dir, "keys")
	if err := os.Mkdir(keysDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "rlproxy.yaml")
	keys := filepath.Join(keysDir, "plans.yaml")
	write(t, cfg, "a")
	write(t, keys, "k1")
	h := start(t, cfg, func() []string { return []string{keys} })

	write(t, keys, "k2")
	if got := h.expect(1); got[0] != "file changed: "+keys {
		t.Errorf("reason %q", got[0])
	}
	write(t, cfg, "b")
	h.expect(1)
}

// TestExtraMoves: Extra is asked again after each reload, so a config that
// starts referencing another file gets it watched.
func TestExtraMoves(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rlproxy.yaml")
	other := filepath.Join(t.TempDir(), "keys.yaml")
	write(t, cfg, "a")
	write(t, other, "k1")
	var extra []string // read and written only on Run's goroutine
	h := &harness{t: t, reasons: make(chan string, 100)}
	w, err := New(Options{
		Path:     cfg,
		Extra:    func() []string { return extra },
		Debounce: debounce,
		Reload: func(reason string) {
			extra = []string{other} // the reloaded config references other
			h.reasons <- reason
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; w.Close() }()

	write(t, other, "k2") // not watched yet
	h.expect(0)
	write(t, cfg, "b")
	h.expect(1)
	write(t, other, "k3")
	if got := h.expect(1); got[0] != "file changed: "+other {
		t.Errorf("reason %q", got[0])
	}
}

func TestSIGHUP(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "rlproxy.yaml")
	write(t, cfg, "a")
	h := start(t, cfg, nil)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := h.expect(1); got[0] != ReasonSignal {
		t.Errorf("reason %q, want %q", got[0], ReasonSignal)
	}
}

func TestDebounce(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "rlproxy.yaml")
	write(t, cfg, "a")
	h := start(t, cfg, nil)
	// 5 writes and a SIGHUP within ~50 ms: one reload, named after the first.
	for i := range 5 {
		write(t, cfg, strings.Repeat("x", i+1))
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := h.expect(1); got[0] != "file changed: "+cfg {
		t.Errorf("reason %q", got[0])
	}
}

// TestCloseStopsRun: Close alone (no context cancel) makes Run return.
func TestCloseStopsRun(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "rlproxy.yaml")
	write(t, cfg, "a")
	w, err := New(Options{Path: cfg, Reload: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { w.Run(context.Background()); close(done) }()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{Reload: func(string) {}}); err == nil {
		t.Error("no path: want error")
	}
	if _, err := New(Options{Path: "x"}); err == nil {
		t.Error("no Reload: want error")
	}
}
