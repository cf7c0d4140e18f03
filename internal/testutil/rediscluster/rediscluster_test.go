package rediscluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/redisserver"
)

// TestClusterHashTag forms a 3-master cluster and checks that the keys of
// one client (one hash tag) land in one slot on one node, that a script over
// them runs there, and that keys of two slots are refused with CROSSSLOT.
func TestClusterHashTag(t *testing.T) {
	c := Start(t, 3)
	if len(c.Addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3", c.Addrs)
	}
	n := c.Nodes[0]
	// Values from the Redis CLUSTER KEYSLOT documentation (CRC16 mod 16384).
	for key, want := range map[string]int64{"somekey": 11058, "foo{hash_tag}": 2515, "bar{hash_tag}": 2515} {
		if got, err := n.Do(t, "CLUSTER", "KEYSLOT", key).AsInt64(); err != nil || got != want {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; want %d", key, got, err, want)
		}
	}

	const api, hourly = "rl:v2:{ip:192.0.2.7}:api", "rl:v2:{ip:192.0.2.7}:hourly"
	slot, err := n.Do(t, "CLUSTER", "KEYSLOT", "ip:192.0.2.7").AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{api, hourly} {
		if got, err := n.Do(t, "CLUSTER", "KEYSLOT", k).AsInt64(); err != nil || got != slot {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; want the tag's slot %d", k, got, err, slot)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.Client(t)
	// One script over both keys (what the valkey store does per decision).
	res, err := cl.Do(ctx, cl.B().Eval().
		Script("redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('CLUSTER', 'MYID')").
		Numkeys(2).Key(api, hourly).Arg("7").Build()).ToString()
	if err != nil {
		t.Fatalf("EVAL over one client's keys: %v", err)
	}
	owner := c.owner(t, slot)
	if res != owner.id {
		t.Fatalf("script ran on node %s, want the owner of slot %d, %s", res, slot, owner.id)
	}
	// The key lives on the owner only; every other node redirects.
	for i, s := range c.Nodes {
		got, err := s.Do(t, "GET", api).ToString()
		if s.Addr == owner.addr {
			if err != nil || got != "7" {
				t.Fatalf("GET on the owner %s = %q, %v; want 7", s.Addr, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "MOVED") {
			t.Fatalf("GET on node %d (%s, not the owner) = %q, %v; want a MOVED error", i, s.Addr, got, err)
		}
	}
	// Keys of two clients (two slots) in one script: CROSSSLOT.
	err = owner.node.Do(t, "EVAL", "return 1", "2", api, "rl:v2:{ip:192.0.2.8}:api").Error()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL over two slots: %v, want CROSSSLOT", err)
	}
}

// TestClusterStop checks that Stop takes every node down.
func TestClusterStop(t *testing.T) {
	c := Start(t, 3)
	c.Stop()
	for _, s := range c.Nodes {
		if conn, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
			conn.Close()
			t.Fatalf("node %s accepts connections after Stop", s.Addr)
		}
	}
}

type slotOwner struct {
	id, addr string
	node     *redisserver.Server
}

// owner finds the node serving slot from CLUSTER SLOTS.
func (c *Cluster) owner(t *testing.T, slot int64) slotOwner {
	t.Helper()
	ranges, err := c.Nodes[0].Do(t, "CLUSTER", "SLOTS").ToArray()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			t.Fatalf("CLUSTER SLOTS entry %v: %v", f, err)
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		if slot < lo || slot > hi {
			continue
		}
		master, _ := f[2].ToArray()
		port, _ := master[1].AsInt64()
		id, _ := master[2].ToString()
		for _, s := range c.Nodes {
			if strings.HasSuffix(s.Addr, ":"+strconv.FormatInt(port, 10)) {
				return slotOwner{id: id, addr: s.Addr, node: s}
			}
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return slotOwner{}
}
