package valkey

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/algo"
	"rlproxy/internal/store"
)

// The split decision of a Cluster: checks of one request in several hash
// slots (Store.Decide's comment says what it guarantees).

// decideGroups decides checks spread over several Cluster slots: groups
// holds the indices into checks of each slot's checks (see Decide).
func (s *Store) decideGroups(ctx context.Context, c valkeygo.Client, checks []store.Check, groups [][]int, now int64, out []algo.Decision) (int64, error) {
	part := make([]store.Check, 0, len(checks))
	pout := make([]algo.Decision, len(checks))
	// runGroup runs group g in mode and copies its decisions into out.
	runGroup := func(mode string, g []int) (refused bool, err error) {
		part = part[:0]
		for _, i := range g {
			part = append(part, checks[i])
		}
		used, err := s.run(ctx, c, mode, part, now, pout[:len(g)])
		if err != nil {
			return false, err
		}
		if now == 0 {
			now = used // every later group decides at the first one's time
		}
		for j, i := range g {
			out[i] = pout[j]
			refused = refused || !pout[j].Allowed
		}
		return refused, nil
	}
	charged := false
	for _, ch := range checks {
		charged = charged || ch.Cost > 0
	}
	mode := modeCheck
	if !charged { // peeks only: one pass
		mode = modeDecide
	}
	refused := false
	for _, g := range groups {
		r, err := runGroup(mode, g)
		if err != nil {
			return 0, err
		}
		refused = refused || r
	}
	if refused || !charged {
		return now, nil
	}
	if err := s.chargeGroups(checks, groups, now, runGroup); err != nil {
		return 0, err
	}
	return now, nil
}

// chargeGroups charges each group in turn (runGroup in mode decide). A
// group that refuses was charged by another request since the check: the
// groups before it are refunded and every other group reports its current
// uncharged state (mode check). A store error refunds the groups charged
// before it, on a best-effort basis.
func (s *Store) chargeGroups(checks []store.Check, groups [][]int, now int64, runGroup func(mode string, g []int) (bool, error)) error {
	for k, g := range groups {
		r, err := runGroup(modeDecide, g)
		if err != nil {
			s.refund(checks, groups[:k], now)
			return err
		}
		if !r {
			continue
		}
		if err := s.refund(checks, groups[:k], now); err != nil {
			return err
		}
		for j, g2 := range groups {
			if j == k {
				continue
			}
			if _, err := runGroup(modeCheck, g2); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// refund undoes the charges of groups made at now. It runs on its own
// context (bounded by Options.Timeout, else 1 s) so that a caller's expired
// deadline does not leave a charge behind.
func (s *Store) refund(checks []store.Check, groups [][]int, now int64) error {
	if len(groups) == 0 {
		return nil
	}
	tmo := s.tmo
	if tmo <= 0 {
		tmo = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), tmo)
	defer cancel()
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	if err := s.execGroups(ctx, c, modeRefund, checks, groups, now); err != nil {
		return fmt.Errorf("refunding a split decision: %w", err)
	}
	return nil
}

// execGroups runs mode once per slot group of checks, in groups' order.
func (s *Store) execGroups(ctx context.Context, c valkeygo.Client, mode string, checks []store.Check, groups [][]int, now int64) error {
	part := make([]store.Check, 0, len(checks))
	for _, g := range groups {
		part = part[:0]
		for _, i := range g {
			part = append(part, checks[i])
		}
		if _, _, _, err := s.exec(ctx, c, mode, part, now); err != nil {
			return err
		}
	}
	return nil
}

// slotGroups returns the indices of checks grouped by Cluster hash slot, in
// ascending slot order (a fixed order for every instance).
func slotGroups(checks []store.Check) [][]int {
	slots := make([]uint16, len(checks))
	for i, ch := range checks {
		slots[i] = Slot(ch.Key)
	}
	var order []uint16
	by := map[uint16][]int{}
	for i, sl := range slots {
		if _, ok := by[sl]; !ok {
			order = append(order, sl)
		}
		by[sl] = append(by[sl], i)
	}
	if len(order) == 1 {
		return [][]int{by[order[0]]}
	}
	slices.Sort(order)
	groups := make([][]int, len(order))
	for i, sl := range order {
		groups[i] = by[sl]
	}
	return groups
}

// Slot returns the Cluster hash slot (0..16383) of key: CRC16 (XMODEM) of
// its hash tag — the part between the first "{" and the next "}", when
// non-empty — or of the whole key, modulo 16384 (Cluster specification).
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}
