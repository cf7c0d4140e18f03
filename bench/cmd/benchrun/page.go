package main

import (
	"context"
	"io"
	"net/http"
	"time"
)

// defaultAdmin is the admin_listen address in the configs of the admin
// page rows; renderConfig replaces it with a free port.
const defaultAdmin = "127.0.0.1:18190"

// pageEvery is how often pollPage asks for /api/stats: what the page's
// script does in an open browser tab.
const pageEvery = time.Second

// pollPage loads the admin page at adminURL once, then GETs /api/stats
// every pageEvery until ctx is done; it returns the polls answered 200 and
// the polls that failed.
func pollPage(ctx context.Context, adminURL string) (ok, failed int) {
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, adminURL+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				failed++
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		} else {
			failed++
		}
	}
	get("/")
	t := time.NewTicker(pageEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ok, failed
		case <-t.C:
			get("/api/stats")
		}
	}
}

// withPagePoll runs f while pollPage polls t's admin page, when t asks for
// it (targetSpec.pollPage), and returns the polls answered and failed.
func withPagePoll(ctx context.Context, t *target, f func() error) (ok, failed int, err error) {
	if !t.PollPage {
		return 0, 0, f()
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok, failed = pollPage(pctx, t.AdminURL)
	}()
	err = f()
	cancel()
	<-done
	return ok, failed, err
}
