package valkey

import (
	"context"
	"fmt"

	"rlproxy/internal/store"
)

// modeCharge is the script mode that charges unconditionally
// (charge_<name> in lua/<name>.lua).
const modeCharge = "3"

// Charge implements store.Store: the script's charge mode (charge_<name>
// in lua/<name>.lua, which package algo's ForceCharge mirrors) adds each check's Cost at now
// (0: the server's TIME) without refusing, a bucket going into debt where
// the charge overdraws it. On a Cluster, checks in several hash slots are
// charged one slot group after another; an error may leave some groups
// charged.
func (s *Store) Charge(ctx context.Context, checks []store.Check, now int64) error {
	if err := s.runEach(ctx, modeCharge, checks, now); err != nil {
		return fmt.Errorf("charging: %w", err)
	}
	return nil
}
