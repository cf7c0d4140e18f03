package admin

import (
	"context"

	"rlproxy/internal/control"
)

// Controller is what the control API reads and changes: a
// *control.Controller (an interface, so the access rules are tested
// without a configuration behind them).
type Controller interface {
	Ensure(ctx context.Context, r control.Request, by string) (e control.Entry, created bool, err error)
	Delete(ctx context.Context, id, by string) (control.Entry, error)
	Get(ctx context.Context, id string) (control.Entry, error)
	List(ctx context.Context, policy, cursor string, limit int) ([]control.Entry, string, error)
}
