package admin

import (
	"context"
	"time"
)

// Request, Entry and ControlError mirror package control's types until it
// is merged (then they are control.Request, control.Entry, *control.Error).
type Request struct {
	Policy    string `json:"policy"`
	Source    string `json:"source,omitempty"`
	Key       string `json:"key"`
	Action    string `json:"action"`
	Limit     *int64 `json:"limit,omitempty"`
	Window    string `json:"window,omitempty"`
	Rate      string `json:"rate,omitempty"`
	Burst     *int64 `json:"burst,omitempty"`
	Plan      string `json:"plan,omitempty"`
	ExpiresIn string `json:"expires_in,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Entry mirrors control.Entry.
type Entry struct {
	ID      string     `json:"id"`
	Policy  string     `json:"policy"`
	Source  string     `json:"source"`
	Client  string     `json:"client"`
	Action  string     `json:"action"`
	Plan    string     `json:"plan,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	By      string     `json:"by"`
	Limit   *int64     `json:"limit,omitempty"`
	Window  string     `json:"window,omitempty"`
	Rate    string     `json:"rate,omitempty"`
	Burst   *int64     `json:"burst,omitempty"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Orphan  string     `json:"orphan,omitempty"`
}

// ControlError mirrors *control.Error.
type ControlError struct{ Kind, Msg string }

func (e *ControlError) Error() string { return e.Msg }

// Controller is what the control API changes: control.Controller.
type Controller interface {
	Set(ctx context.Context, r Request, by string) (Entry, error)
	Delete(ctx context.Context, id, by string) (Entry, error)
	Get(ctx context.Context, id string) (Entry, error)
	List(ctx context.Context, policy, cursor string, limit int) ([]Entry, string, error)
}
