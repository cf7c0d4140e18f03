// Package rediscluster starts a real Redis Cluster (cluster-enabled
// redis-server processes on loopback, slots assigned by `redis-cli --cluster
// create`) for tests of rlproxy's Valkey Cluster support: hash-tagged keys of
// one client in one slot, CROSSSLOT errors, MOVED redirections.
//
// redis-server and redis-cli are taken from PATH. When either is missing the
// test is skipped, unless the environment sets RLPROXY_REQUIRE_REDIS=1 (CI),
// where it fails.
package rediscluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
)

// formTimeout bounds how long the cluster may take to report
// cluster_state:ok on every node after slots are assigned.
const formTimeout = 20 * time.Second

// Cluster is a running Redis Cluster of masters, without replicas
// (Start) or with one each (StartReplicated). Its methods are safe for use
// by concurrent goroutines.
type Cluster struct {
	// Addrs are the nodes' "127.0.0.1:port" addresses, seeds for a client.
	Addrs []string
	// Nodes are the processes, in Addrs order (Nodes[i].Stop for an outage of
	// one shard).
	Nodes []*redisserver.Server

	mu     sync.Mutex
	client valkey.Client // lazily created by Client
}

// Start runs masters cluster-enabled redis-server nodes (at least 3, the
// minimum `redis-cli --cluster create` accepts), assigns the 16384 slots
// evenly among them, waits until every node reports cluster_state:ok and
// knows all the others, and registers cleanup (nodes killed, client closed).
func Start(t testing.TB, masters int) *Cluster {
	t.Helper()
	return start(t, masters, 0, 5000)
}

// StartReplicated is Start with one replica per master (2 × masters
// nodes), a cluster-node-timeout of 1 s, so that a replica takes over
// about 2 s after its master dies (Cluster failover), and
// cluster-require-full-coverage no, so that the other masters keep
// serving their slots meanwhile: for tests of an outage of one master.
func StartReplicated(t testing.TB, masters int) *Cluster {
	t.Helper()
	return start(t, masters, 1, 1000, "--cluster-require-full-coverage", "no")
}

// start runs masters × (1 + replicas) nodes with cluster-node-timeout
// nodeTimeoutMs and the extra redis-server arguments, and creates the
// cluster.
func start(t testing.TB, masters, replicas, nodeTimeoutMs int, extra ...string) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("rediscluster: %d masters; redis-cli --cluster create needs at least 3", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("RLPROXY_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-cli not found in PATH and RLPROXY_REQUIRE_REDIS=1: %v", err)
		}
		t.Skipf("skipping: redis-cli not found in PATH (install redis-tools, or set RLPROXY_REQUIRE_REDIS=1 to fail instead): %v", err)
	}
	c := &Cluster{}
	t.Cleanup(func() {
		c.mu.Lock()
		if c.client != nil {
			c.client.Close()
			c.client = nil
		}
		c.mu.Unlock()
	})
	dir := t.TempDir()
	for range masters * (1 + replicas) {
		bus := netutil.FreePort(t) // the node-to-node port; a claimed pick like the client port
		s := redisserver.Start(t, append([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", bus)),
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", strconv.Itoa(nodeTimeoutMs),
		}, extra...)...)
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), formTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("creating the cluster (redis-cli %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitFormed(t, ctx, masters*(1+replicas))
	if replicas > 0 {
		c.waitReplicasSynced(t, ctx)
	}
	return c
}

// waitReplicasSynced polls INFO replication on every node until each
// replica reports its link to its master up: a replica that never synced
// refuses to take over (its data is too old), so a test could not see a
// failover.
func (c *Cluster) waitReplicasSynced(t testing.TB, ctx context.Context) {
	t.Helper()
	for _, s := range c.Nodes {
		for {
			info, err := s.Do(t, "INFO", "replication").ToString()
			if err == nil && (strings.Contains(info, "role:master\r\n") || strings.Contains(info, "master_link_status:up\r\n")) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("replica %s not synced within %v: %v\n%s", s.Addr, formTimeout, err, info)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// waitFormed polls CLUSTER INFO on every node until each reports
// cluster_state:ok, all slots ok and all nodes known.
func (c *Cluster) waitFormed(t testing.TB, ctx context.Context, nodes int) {
	t.Helper()
	want := []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(nodes)}
	for _, s := range c.Nodes {
		for {
			info, err := s.Do(t, "CLUSTER", "INFO").ToString()
			if err == nil && hasAll(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("cluster node %s not formed within %v (want %v): %v\n%s", s.Addr, formTimeout, want, err, info)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func hasAll(info string, lines []string) bool {
	for _, l := range lines {
		if !strings.Contains(info, l+"\r\n") {
			return false
		}
	}
	return true
}

// Client returns a valkey-go cluster client seeded with Addrs (it follows
// MOVED redirections), shared by all callers and closed at cleanup.
func (c *Cluster) Client(t testing.TB) valkey.Client {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		cl, err := valkey.NewClient(valkey.ClientOption{InitAddress: c.Addrs, DisableCache: true})
		if err != nil {
			t.Fatalf("connecting to the cluster %v: %v", c.Addrs, err)
		}
		c.client = cl
	}
	return c.client
}

// Stop kills every node (see redisserver.Server.Stop). Stopping a stopped
// cluster does nothing; cleanup also stops it.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}
