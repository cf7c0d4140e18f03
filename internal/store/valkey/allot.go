package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"rlproxy/internal/store"
)

// modeAllot is the script mode that takes an allotment (lua/dispatch.lua).
const modeAllot = "4"

// Allot implements allotment.Source: one script run takes a slice of
// ck's allowance at now (Unix ms; 0 = the server's TIME) — at most
// ck.Cost units and at most permille/1000 (1..1000) of the units left —
// and charges it at once (allot_<name> in lua/<name>.lua). It returns the
// time used, the units granted (0 when too few are left), the units left
// after them and the ms until the limit is idle (the window's end, or the
// bucket full). It never joins a batch: merged identical runs would each
// take a slice. Errors: connecting, timeout, a script error (an algorithm
// that takes no allotments), a malformed reply.
func (s *Store) Allot(ctx context.Context, ck store.Check, permille, now int64) (used, granted, left, reset int64, err error) {
	if permille < 1 || permille > 1000 {
		return 0, 0, 0, 0, fmt.Errorf("allotting: fraction %d‰: want 1..1000", permille)
	}
	c, err := s.Client(ctx)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	cl := calls.Get().(*call)
	defer cl.release()
	checks := [1]store.Check{ck}
	s.scriptArgs(cl, modeAllot, checks[:], now)
	cl.args[2] = strconv.FormatInt(permille, 10)
	tctx, cancel := s.withTimeout(ctx)
	defer cancel()
	t := s.topo.table.Load()
	reply, err := s.script.Exec(tctx, c, cl.keys, cl.args).ToArray()
	if !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		s.roundTrip(s.blame(t, ck.Key, err), err)
	}
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("allotting: %w", err)
	}
	if len(reply) != 4 {
		return 0, 0, 0, 0, fmt.Errorf("allotting: %d values in the reply, want 4", len(reply))
	}
	var v [4]int64
	for i := range v {
		if v[i], err = reply[i].AsInt64(); err != nil {
			return 0, 0, 0, 0, fmt.Errorf("allotting: reply value %d: %w", i, err)
		}
	}
	return v[0], v[1], v[2], v[3], nil
}
