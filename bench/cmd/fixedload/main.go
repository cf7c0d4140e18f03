// Command fixedload sends an exact number of GET requests, for
// bench/instr.sh: a count, not a duration, so two runs of a proxy under
// valgrind differ by exactly the requests between them.
//
//	fixedload -url URL -n N [-c 4]   N requests over c keep-alive connections
//	fixedload -free-port             print a free loopback TCP port
//
// It first waits (up to 60 s) for one 200 answer, which counts among the N.
// It exits 1 if any request failed or was not answered 200.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/testutil/netutil"
)

func main() {
	url := flag.String("url", "", "URL to GET")
	n := flag.Int("n", 1000, "requests")
	c := flag.Int("c", 4, "keep-alive connections (concurrent requests)")
	freePort := flag.Bool("free-port", false, "print a free loopback TCP port and exit")
	flag.Parse()
	if *freePort {
		addr, err := netutil.PickFreeAddr()
		if err != nil {
			fail(err)
		}
		_, port, _ := net.SplitHostPort(addr)
		fmt.Println(port)
		return
	}
	if *url == "" || *n < 1 || *c < 1 {
		fail(errors.New("want -url, -n ≥ 1 and -c ≥ 1"))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c, MaxConnsPerHost: *c}}
	if err := waitReady(client, *url); err != nil {
		fail(err)
	}
	if bad := load(client, *url, *n-1, *c); bad > 0 {
		fail(fmt.Errorf("%d of %d requests failed or were not 200", bad, *n))
	}
}

// waitReady GETs url until it answers 200, for at most 60 s.
func waitReady(client *http.Client, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := get(client, url)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// load sends n requests from c goroutines and returns how many failed.
func load(client *http.Client, url string, n, c int) int64 {
	var left, bad atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if get(client, url) != nil {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return bad.Load()
}

// get sends one GET and reads the whole answer.
func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fixedload:", err)
	os.Exit(1)
}
