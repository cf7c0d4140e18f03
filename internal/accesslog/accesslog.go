// Package accesslog writes rlproxy's access log (`log.access`): one line
// per request, JSON or nginx's combined format with rlproxy's fields
// appended, on stderr or a file reopened on SIGUSR1 (logrotate's
// postrotate, as nginx's USR1).
//
// The request path never waits for it: a line is formatted on the
// request's goroutine into a pooled buffer and handed to the writer
// goroutine over a bounded channel; when the channel is full the line is
// dropped and counted (rlproxy_access_log_dropped_total). Below the bound
// no line is lost, shutdown included (Close drains).
//
// Credentials never reach it verbatim: no request header is logged but
// the User-Agent and the Referer (without its query), and the values of
// query parameters that a key source reads (e.g. ?api_key=) are replaced
// by "REDACTED".
package accesslog

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/config"
)

// Entry is one request's line. The strings are the request's own, read
// during Log only.
type Entry struct {
	Time      time.Time      // when the request arrived
	Client    netip.Addr     // the real client address (real_ip)
	Peer      netip.AddrPort // the TCP peer (logged "" when unknown)
	Method    string
	Host      string
	Path      string // the escaped path
	Query     string // the raw query; key-source values are redacted
	Proto     string // "HTTP/1.1", "HTTP/2.0"
	UserAgent string
	Referer   string // logged without its query
	Status    int
	Bytes     int64 // body bytes sent
	Duration  time.Duration
	Route     string // "" = no route matched
	Decision  string // allowed, delayed, rejected, unavailable, no-route, unlimited, quota
	Policy    string // the refusing policy (rejected)
	WaitMS    int64  // the leaky-bucket wait (delayed)
	// Upstream is the last server tried (host:port), UpstreamStatus its
	// status (0: none), UpstreamTime its time to response headers.
	Upstream       string
	UpstreamStatus int
	UpstreamTime   time.Duration
	Retries        int
	RequestID      string
	// Redact are the query parameter names whose values are never logged
	// (the configuration's query key sources, QueryKeys).
	Redact []string
}

// Logger is one access log. Safe for concurrent use; build it with New.
type Logger struct {
	json    bool
	path    string // "" = the writer given to New
	lines   chan *[]byte
	bufs    sync.Pool
	dropped func()
	closed  atomic.Bool

	out    io.Writer // the current destination (stderr or file)
	file   *os.File  // non-nil when path is set; owned by run
	reopen chan chan error
	stop   chan struct{}
	done   chan struct{}
}

// New opens the access log of c: c.Path (created 0644, appended to) or,
// when empty, stderr. dropped is called for each line dropped because the
// buffer was full (nil: not counted). Errors: the file cannot be opened.
func New(c config.AccessLog, stderr io.Writer, dropped func()) (*Logger, error) {
	buffer := c.Buffer
	if buffer <= 0 {
		buffer = 4096
	}
	l := &Logger{json: c.Format != "combined", path: c.Path, lines: make(chan *[]byte, buffer),
		dropped: dropped, out: stderr, reopen: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
	l.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	if c.Path != "" {
		f, err := openLog(c.Path)
		if err != nil {
			return nil, err
		}
		l.file, l.out = f, f
	}
	go l.run()
	return l, nil
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the access log: %w", err)
	}
	return f, nil
}

// Log formats e and queues it; it never blocks. A full buffer drops it.
func (l *Logger) Log(e *Entry) {
	if l.closed.Load() {
		return
	}
	bp := l.bufs.Get().(*[]byte)
	if l.json {
		*bp = appendJSON((*bp)[:0], e)
	} else {
		*bp = appendCombined((*bp)[:0], e)
	}
	select {
	case l.lines <- bp:
	default:
		l.bufs.Put(bp)
		if l.dropped != nil {
			l.dropped()
		}
	}
}

// Reopen closes and reopens the log file (after logrotate moved it); a
// log on stderr has nothing to reopen. Lines queued meanwhile wait.
func (l *Logger) Reopen() error {
	if l.path == "" || l.closed.Load() {
		return nil
	}
	ch := make(chan error)
	select {
	case l.reopen <- ch:
		return <-ch
	case <-l.done:
		return nil
	}
}

// Close writes every queued line, then closes the file. Lines logged
// after Close are discarded.
func (l *Logger) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.stop)
	<-l.done
	return nil
}

// run is the writer goroutine: it batches queued lines into one write.
func (l *Logger) run() {
	defer close(l.done)
	w := bufio.NewWriterSize(l.out, 64<<10)
	write := func(bp *[]byte) {
		_, _ = w.Write(*bp)
		if cap(*bp) <= 64<<10 { // an outsized line is left to the GC
			l.bufs.Put(bp)
		}
	}
	for {
		select {
		case bp := <-l.lines:
			write(bp)
			for more := true; more; {
				select {
				case bp := <-l.lines:
					write(bp)
				default:
					more = false
				}
			}
			_ = w.Flush()
		case ch := <-l.reopen:
			_ = w.Flush()
			ch <- l.reopenFile(w)
		case <-l.stop:
			for len(l.lines) > 0 { // Log no longer sends: what is queued is all
				write(<-l.lines)
			}
			_ = w.Flush()
			if l.file != nil {
				_ = l.file.Close()
			}
			return
		}
	}
}

// reopenFile swaps the file under w for a fresh open of path. On error
// the old file stays in use.
func (l *Logger) reopenFile(w *bufio.Writer) error {
	f, err := openLog(l.path)
	if err != nil {
		return err
	}
	_ = l.file.Close()
	l.file, l.out = f, f
	w.Reset(f)
	return nil
}
