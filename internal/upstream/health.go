package upstream

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"rlproxy/internal/config"
)

// prober is one server's active health check: a goroutine that GETs the
// check path every interval and holds the server out of rotation after
// Fails consecutive failures, back in after Passes consecutive successes
// (Caddy health_uri/health_fails/health_passes; nginx plus health_check).
type prober struct {
	hc     config.HealthCheck
	cancel context.CancelFunc
	done   chan struct{}
}

// startProber starts probing s. The first probe goes at once: a server
// that is down when rlproxy starts is found within Fails intervals.
func startProber(s *Server, hc config.HealthCheck, log *slog.Logger) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{hc: hc, cancel: cancel, done: make(chan struct{})}
	target := *s.url
	target.Path, target.RawPath = hc.Path, ""
	go p.run(ctx, s, &target, log)
	return p
}

// stop ends the prober and waits for its goroutine; s keeps its state.
func (p *prober) stop() {
	p.cancel()
	<-p.done
}

func (p *prober) run(ctx context.Context, s *Server, target *url.URL, log *slog.Logger) {
	defer close(p.done)
	var fails, passes int
	for {
		if p.probe(ctx, s, target) {
			fails, passes = 0, passes+1
			if passes >= p.hc.Passes && s.activeDown.CompareAndSwap(true, false) && log != nil {
				log.Info("upstream server passed its health check: back in rotation", "upstream", s.Upstream, "server", s.Label)
			}
		} else if ctx.Err() == nil {
			fails, passes = fails+1, 0
			if fails >= p.hc.Fails && s.activeDown.CompareAndSwap(false, true) && log != nil {
				log.Warn("upstream server failed its health check: out of rotation", "upstream", s.Upstream, "server", s.Label, "path", p.hc.Path)
			}
		}
		t := time.NewTimer(p.hc.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// probe sends one check request; true when it answered the expected
// status (any 2xx or 3xx when expect_status is 0) within the timeout.
func (p *prober) probe(ctx context.Context, s *Server, target *url.URL) bool {
	ctx, cancel := context.WithTimeout(ctx, p.hc.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "rlproxy-health-check")
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		return false
	}
	// Read a little so the connection can be reused; a larger body is cut.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
	if p.hc.ExpectStatus != 0 {
		return resp.StatusCode == p.hc.ExpectStatus
	}
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
