package proxy_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamedResponsesFlushAtOnce: with ReverseProxy's FlushInterval 0,
// a response without Content-Length (chunked) or of type text/event-stream
// must still reach the client write by write: the upstream holds its
// second part until the client has read the first one, so a proxy that
// buffered would make the client wait out the test's deadline.
func TestStreamedResponsesFlushAtOnce(t *testing.T) {
	for _, ct := range []string{"text/event-stream", "text/plain"} {
		t.Run(ct, func(t *testing.T) {
			got := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", ct)
				fmt.Fprint(w, "data: one\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-got:
				case <-time.After(5 * time.Second):
				}
				fmt.Fprint(w, "data: two\n\n")
			}))
			defer up.Close()
			cfg := fmt.Sprintf(benchConfigHead, up.URL) + benchPolicy
			front := httptest.NewServer(benchAppT(t, cfg).Handler())
			defer front.Close()

			client := &http.Client{Timeout: 10 * time.Second}
			resp, err := client.Get(front.URL + "/events")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			br := bufio.NewReader(resp.Body)
			first := make(chan string, 1)
			go func() { l, _ := br.ReadString('\n'); first <- l }()
			select {
			case l := <-first:
				if l != "data: one\n" {
					t.Fatalf("first line %q", l)
				}
			case <-time.After(3 * time.Second):
				close(got)
				t.Fatal("first event not flushed to the client while the upstream was still streaming")
			}
			close(got)
			rest := new(strings.Builder)
			_, _ = bufio.NewReader(br).WriteTo(rest)
			if rest.String() != "\ndata: two\n\n" {
				t.Fatalf("rest %q", rest.String())
			}
		})
	}
}
