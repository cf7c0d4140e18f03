// Package reload tells rlproxy when to reload its config: on SIGHUP and when
// the config file (or a file it references, e.g. a plans keys_file) changes.
//
// Files are watched through their DIRECTORIES, not their inodes: editors save
// by writing a temporary file and renaming it over the original, and
// Kubernetes updates a ConfigMap volume by swapping the `..data` symlink
// (config.yaml → ..data/config.yaml → ..2026_11_29_…/config.yaml). A watch
// on the file itself would follow the old inode and miss both. After every
// event in a watched directory the symlinks are re-resolved, so a swapped
// `..data` counts as a change of config.yaml.
//
// Triggers are debounced (docs/CONTRACT.md: ~100 ms) so one save, which is several
// filesystem events, is one reload. The Watcher does not parse anything: its
// Reload callback loads, validates and swaps, and decides that content
// identical to the running config is not a reload.
package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is the quiet time after the last trigger before Reload is
// called, when Options.Debounce is 0.
const DefaultDebounce = 100 * time.Millisecond

// ReasonSignal is the reason given to Reload when SIGHUP started it.
const ReasonSignal = "SIGHUP"

// Options configures a Watcher.
type Options struct {
	// Path is the config file. Required.
	Path string
	// Extra returns further files to watch (e.g. a plans keys_file); nil means
	// none. It is called by New and after every Reload call, so a reload that
	// references other files moves the watches.
	Extra func() []string
	// Debounce is the quiet time after the last trigger before Reload runs;
	// 0 means DefaultDebounce.
	Debounce time.Duration
	// Reload is called from Run's goroutine, never concurrently with itself.
	// reason is for logs: ReasonSignal or "file changed: PATH" (the first
	// trigger of the debounce window). Required.
	Reload func(reason string)
	// Logger receives watch problems (a directory that cannot be watched);
	// nil discards them.
	Logger *slog.Logger
}

// Watcher turns SIGHUP and config file changes into debounced Reload calls.
// Build it with New, run it with Run, stop it with Close or Run's context.
type Watcher struct {
	opts Options
	fs   *fsnotify.Watcher
	sig  chan os.Signal

	// Owned by Run's goroutine after New returns.
	paths   []string // Path and Extra(), as given
	targets []target // paths resolved

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// target is one watched file: link is its path with the directory resolved
// (how fsnotify names events in that directory), real is the file it finally
// resolves to ("" when it does not exist right now).
type target struct {
	link, real string
}

// New starts watching opts.Path (and opts.Extra()) and listening for SIGHUP.
// Signals and events arriving before Run are kept for it. It returns an error
// if Path or Reload is missing or the inotify watcher cannot be created; a
// directory that cannot be watched is logged, not an error, since a reload
// may fix it.
func New(opts Options) (*Watcher, error) {
	if opts.Path == "" {
		return nil, errors.New("creating watcher: no config path")
	}
	if opts.Reload == nil {
		return nil, errors.New("creating watcher: no Reload callback")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("creating watcher: %w", err)
	}
	w := &Watcher{opts: opts, fs: fsw, sig: make(chan os.Signal, 1), closed: make(chan struct{})}
	signal.Notify(w.sig, syscall.SIGHUP)
	w.setPaths()
	return w, nil
}

// Run delivers triggers to Reload until ctx is done or Close is called. It
// must be called at most once.
func (w *Watcher) Run(ctx context.Context) {
	var (
		timer   *time.Timer
		fire    <-chan time.Time // nil while no trigger is pending
		pending string           // reason of the first pending trigger
	)
	trigger := func(reason string) {
		if fire == nil {
			pending = reason
			timer = time.NewTimer(w.opts.Debounce)
			fire = timer.C
			return
		}
		timer.Reset(w.opts.Debounce)
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.sig:
			if !ok {
				return
			}
			trigger(ReasonSignal)
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if name, changed := w.relevant(ev); changed {
				trigger("file changed: " + name)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.opts.Logger.Warn("config watch error", "err", err)
		case <-fire:
			fire = nil
			// select picks among ready cases at random: do not reload after
			// a stop that raced with the timer.
			select {
			case <-ctx.Done():
				return
			case <-w.closed:
				return
			default:
			}
			w.opts.Reload(pending)
			// The new config may reference other files.
			w.setPaths()
		}
	}
}

// Close stops watching and listening for SIGHUP and makes Run return. It is
// safe to call more than once; it returns the watcher's close error.
func (w *Watcher) Close() error {
	var err error
	w.closeOnce.Do(func() {
		close(w.closed)
		signal.Stop(w.sig)
		close(w.sig)
		err = w.fs.Close()
	})
	return err
}

// relevant reports whether ev changes a watched file, and which. It re-resolves
// symlinks, so a `..data` swap is seen as a change of the file behind it.
func (w *Watcher) relevant(ev fsnotify.Event) (string, bool) {
	if ev.Op == fsnotify.Chmod {
		return "", false // touch, or a ConfigMap's mode fix-up: no content change
	}
	name := filepath.Clean(ev.Name)
	old := w.targets
	w.resolve()
	for i, t := range w.targets {
		if name == t.link || name == old[i].real || t.real != old[i].real {
			return t.link, true
		}
	}
	return "", false
}

// setPaths reads Path and Extra and resolves them.
func (w *Watcher) setPaths() {
	w.paths = []string{w.opts.Path}
	if w.opts.Extra != nil {
		w.paths = append(w.paths, w.opts.Extra()...)
	}
	w.resolve()
}

// resolve recomputes the targets from paths (into a new slice: callers keep
// the old one to compare) and moves the directory watches to match.
func (w *Watcher) resolve() {
	w.targets = make([]target, len(w.paths))
	var dirs []string
	for i, p := range w.paths {
		t := resolveTarget(p)
		w.targets[i] = t
		dirs = append(dirs, filepath.Dir(t.link))
		if t.real != "" {
			dirs = append(dirs, filepath.Dir(t.real))
		}
	}
	// WatchList, not our own bookkeeping: inotify drops the watch of a
	// deleted directory (an old ConfigMap generation) by itself.
	watched := w.fs.WatchList()
	for _, d := range watched {
		if !slices.Contains(dirs, d) {
			_ = w.fs.Remove(d) // gone already is fine
		}
	}
	for _, d := range dirs {
		if slices.Contains(watched, d) {
			continue
		}
		watched = append(watched, d)
		if err := w.fs.Add(d); err != nil {
			w.opts.Logger.Warn("cannot watch config directory", "dir", d, "err", err)
		}
	}
}

// resolveTarget names p the way fsnotify will: absolute, directory symlinks
// resolved, final element kept (it may itself be a symlink that gets swapped).
func resolveTarget(p string) target {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = filepath.Clean(p)
	}
	link := abs
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		link = filepath.Join(dir, filepath.Base(abs))
	}
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		real = ""
	}
	return target{link: link, real: real}
}
