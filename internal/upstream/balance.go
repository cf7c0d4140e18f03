package upstream

import (
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
)

// balancer picks a server of a pool among the eligible ones not yet tried
// by this request (tried is a bit set of server indexes). It returns -1
// when none is left.
type balancer interface {
	pick(p *Pool, now int64, tried uint64, hash uint32) int
}

// roundRobin is nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer): every pick adds each candidate's weight
// to its current weight, takes the largest, and subtracts the candidates'
// total from it. Over any run of total picks each server gets exactly its
// weight's share, interleaved (weights 5,1,1 give a a b a c a a, not
// a a a a a b c). nginx's effective_weight, lowered on failures, is left
// out: passive health takes a failing server out instead.
type roundRobin struct {
	mu      sync.Mutex
	current []int64
}

func newRoundRobin(n int) *roundRobin { return &roundRobin{current: make([]int64, n)} }

func (b *roundRobin) pick(p *Pool, now int64, tried uint64, _ uint32) int {
	if len(p.servers) == 1 { // the one-server pool (url:): no weights to balance
		if ok, _ := p.servers[0].eligible(now); ok && tried == 0 {
			return 0
		}
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pickLocked(p, now, tried, func(int) bool { return true })
}

// pickLocked is one smooth weighted round-robin step over the candidates
// that also satisfy among.
func (b *roundRobin) pickLocked(p *Pool, now int64, tried uint64, among func(int) bool) int {
	best, total := -1, int64(0)
	for i, s := range p.servers {
		if tried&(1<<i) != 0 || !among(i) {
			continue
		}
		if ok, _ := s.eligible(now); !ok {
			continue
		}
		w := int64(p.weights[i])
		b.current[i] += w
		total += w
		if best < 0 || b.current[i] > b.current[best] {
			best = i
		}
	}
	if best >= 0 {
		b.current[best] -= total
	}
	return best
}

// leastConn picks the server with the fewest requests in flight per unit
// of weight; ties go by smooth weighted round robin among them (nginx
// ngx_http_upstream_least_conn_module).
type leastConn struct{ rr *roundRobin }

func (b *leastConn) pick(p *Pool, now int64, tried uint64, _ uint32) int {
	b.rr.mu.Lock()
	defer b.rr.mu.Unlock()
	best := -1
	var bestN, bestW int64
	for i, s := range p.servers {
		if tried&(1<<i) != 0 {
			continue
		}
		if ok, _ := s.eligible(now); !ok {
			continue
		}
		n, w := s.inflight.Load(), int64(p.weights[i])
		// n/w < bestN/bestW without division.
		if best < 0 || n*bestW < bestN*w {
			best, bestN, bestW = i, n, w
		}
	}
	if best < 0 {
		return -1
	}
	return b.rr.pickLocked(p, now, tried, func(i int) bool {
		return p.servers[i].inflight.Load()*bestW == bestN*int64(p.weights[i])
	})
}

// pointsPerWeight is how many ring points a server gets per unit of
// weight (nginx's hash ... consistent uses 160, as ketama).
const pointsPerWeight = 160

// ring is consistent hashing over the pool (nginx `hash $key consistent`):
// each server owns points on a 32-bit circle placed by ringHash of its
// label, and a client goes to the server of the first point at or after
// its key's ringHash. Removing a server moves only the clients of its points
// (about 1/n of them) to the next point's server; a down server's clients
// go to the next eligible server on the ring. The placement depends on
// labels alone, so every rlproxy instance agrees.
type ring struct {
	points []ringPoint // sorted by hash
}

type ringPoint struct {
	hash   uint32
	server uint8
}

// ringHash places b on the ring: its CRC-32 (IEEE) through murmur3's
// 32-bit finalizer. CRC-32 alone is linear, so labels that differ in a
// few digits (ports, the last octet) put their points in correlated
// places: for 2 % of port choices, one of three servers on loopback got
// under a sixth of the clients (TestRingBalance). The finalizer spreads
// every input bit over the whole hash; the placement still depends on
// bytes alone, so every instance agrees.
func ringHash(b []byte) uint32 {
	h := crc32.ChecksumIEEE(b)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func newRing(p *Pool) *ring {
	r := &ring{}
	for i, s := range p.servers {
		for j := range p.weights[i] * pointsPerWeight {
			key := s.Label + "-" + strconv.Itoa(j)
			r.points = append(r.points, ringPoint{ringHash([]byte(key)), uint8(i)})
		}
	}
	slices.SortFunc(r.points, func(a, b ringPoint) int {
		if a.hash != b.hash {
			return int(int64(a.hash) - int64(b.hash))
		}
		return int(a.server) - int(b.server)
	})
	return r
}

func (r *ring) pick(p *Pool, now int64, tried uint64, hash uint32) int {
	n := len(r.points)
	start, _ := slices.BinarySearchFunc(r.points, hash, func(pt ringPoint, h uint32) int {
		switch {
		case pt.hash < h:
			return -1
		case pt.hash > h:
			return 1
		}
		return 0
	})
	seen := tried
	for k := range n {
		i := int(r.points[(start+k)%n].server)
		if seen&(1<<i) != 0 {
			continue
		}
		seen |= 1 << i
		if ok, _ := p.servers[i].eligible(now); ok {
			return i
		}
		if seen == p.all {
			break
		}
	}
	return -1
}
