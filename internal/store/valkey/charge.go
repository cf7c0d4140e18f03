package valkey

import (
	"context"
	"fmt"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/store"
)

// modeCharge is the script mode that charges unconditionally (lua/charge.lua).
const modeCharge = "3"

// Charge implements store.Store: the script's charge mode (lua/charge.lua,
// which package algo's ForceCharge mirrors) adds each check's Cost at now
// (0: the server's TIME) without refusing, a bucket going into debt where
// the charge overdraws it. On a Cluster, checks in several hash slots are
// charged one slot group after another; an error may leave some groups
// charged.
func (s *Store) Charge(ctx context.Context, checks []store.Check, now int64) error {
	if len(checks) == 0 {
		return nil
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	groups := [][]int{nil}
	if c.Mode() == valkeygo.ClientModeCluster && len(checks) > 1 {
		groups = slotGroups(checks)
	}
	if len(groups) == 1 {
		if _, _, _, err := s.exec(ctx, c, modeCharge, checks, now); err != nil {
			return fmt.Errorf("charging: %w", err)
		}
		return nil
	}
	part := make([]store.Check, 0, len(checks))
	for _, g := range groups {
		part = part[:0]
		for _, i := range g {
			part = append(part, checks[i])
		}
		if _, _, _, err := s.exec(ctx, c, modeCharge, part, now); err != nil {
			return fmt.Errorf("charging: %w", err)
		}
	}
	return nil
}
