// Package control holds the entries an operator sets while rlproxy serves:
// per-client bans, exemptions and overrides (other limits, or another
// plan), each for one policy (or plan set) and one client, with an
// optional expiry and a reason. The admin API and `rlproxy ctl` change
// them through a Controller; package policy applies them on every decision
// (Controller.Table, Table.Find).
//
// # API
//
//	c := control.New(control.Options{...})
//	c.Configure(cfg)                     // at start and on every reload
//	e, err := c.Set(ctx, req, "alice")   // an identical applied entry is returned, not repeated
//	e, created, err := c.Ensure(ctx, req, "alice") // POST /api/entries: 201 or 200
//	before, err := c.Delete(ctx, id, by) // DELETE /api/entries/{id}
//	e, err := c.Get(ctx, id)
//	list, next, err := c.List(ctx, policy, cursor, limit)
//
// Errors of Set, Delete and Get that the caller made are *Error with a
// Kind (invalid, not_found, too_many) and its HTTP status (Error.Status);
// any other error is the store's (Valkey unreachable: 503).
//
// # Clients
//
// A client is named by a source and a raw value (Request.Source,
// Request.Key): "ip" (an address), "cidr" (a prefix), a key source such as
// "header:X-API-Key" that the policy is keyed by, or "" for the policy's
// own key (its first source). A credential is hashed exactly as the
// policy hashes it (package clientkey, keyed with store.key_hash_secret)
// and only its hashed id is kept; the raw value is never stored or
// logged. An ip or cidr entry matches the client's resolved address
// whatever source the policy's key took, so a banned address that adds
// an API key is still banned.
//
// Each entry keeps its source and a fingerprint of the hash secret beside
// its client id. An entry whose policy (or plan set, or plan) is gone,
// whose source the policy is no longer keyed by, whose secret was
// rotated, or whose override no longer fits the policy's algorithm is an
// orphan: listed with the reason (Entry.Orphan), never applied.
//
// # Storage
//
// With the memory store the entries live in the process and, with
// control.state_file, in a JSON file written atomically (a temporary file
// renamed over it) and read at start. With Valkey they live in Valkey
// (under the key prefix, hash tag {ctl}) and every instance polls a
// version key (Run): a change made on one instance applies on the others
// within one poll interval. A reload (Configure) re-evaluates every entry
// against the new configuration and never drops one.
package control

import (
	"net/http"
	"time"
)

// Actions an entry takes (Request.Action).
const (
	ActionBan      = "ban"      // refuse every request of the client
	ActionExempt   = "exempt"   // pass, uncounted
	ActionOverride = "override" // other limits (the algorithm's fields), or another plan
)

// Sources that name a client by address rather than by the policy's key.
const (
	SourceIP   = "ip"
	SourceCIDR = "cidr"
)

// Request is one change asked for through the API (the JSON body of POST
// /api/entries, docs/CONTRACT.md).
type Request struct {
	// Policy names the policy, or with Plan a plan set (`plans:`).
	Policy string `json:"policy"`
	// Source names the client's source: "" the policy's own key, "ip",
	// "cidr", or a key source such as "header:X-API-Key".
	Source string `json:"source,omitempty"`
	// Key is the raw value (an address, a prefix, a credential); hashed as
	// the policy hashes it, never stored or logged in clear.
	Key string `json:"key"`
	// Action is ActionBan, ActionExempt or ActionOverride.
	Action string `json:"action"`
	// Limit and Window override a window's or concurrency's fields; Rate
	// and Burst a bucket's (the policy's algorithm decides which apply).
	Limit  *int64 `json:"limit,omitempty"`
	Window string `json:"window,omitempty"`
	Rate   string `json:"rate,omitempty"`
	Burst  *int64 `json:"burst,omitempty"`
	// Plan, with ActionOverride on a plan set, is the plan the client gets.
	Plan string `json:"plan,omitempty"`
	// ExpiresIn is a duration ("1h"); "" never expires.
	ExpiresIn string `json:"expires_in,omitempty"`
	// Reason is free text for the audit and the admin page (≤ 512 bytes).
	Reason string `json:"reason,omitempty"`
}

// Entry is a stored entry as the API shows it: the client by its hashed
// display id only.
type Entry struct {
	ID     string `json:"id"`
	Policy string `json:"policy"`
	// Source is the source the client was named by ("ip", "cidr",
	// "header:X-Api-Key"; the policy's own key resolved to its source).
	Source string `json:"source"`
	// Client is the display id: a credential's hashed id shortened
	// ("h:" + 12 hex digits), an address as "ip#"/"cidr#" and 12 hex
	// digits of a hash keyed with store.key_hash_secret (stable across
	// instances and restarts).
	Client  string     `json:"client"`
	Action  string     `json:"action"`
	Limit   *int64     `json:"limit,omitempty"`
	Window  string     `json:"window,omitempty"`
	Rate    string     `json:"rate,omitempty"`
	Burst   *int64     `json:"burst,omitempty"`
	Plan    string     `json:"plan,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	By      string     `json:"by,omitempty"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	// Orphan says why the entry no longer applies ("" when it applies).
	Orphan string `json:"orphan,omitempty"`
}

// Kind classifies an Error.
type Kind string

// Error kinds.
const (
	KindInvalid  Kind = "invalid"   // the request is malformed or names what does not exist: 400
	KindNotFound Kind = "not_found" // no entry has that id: 404
	KindTooMany  Kind = "too_many"  // the policy holds control.max_entries already: 409
)

// Error is a change refused for what the caller asked.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Status is the HTTP status answering e.
func (e *Error) Status() int {
	switch e.Kind {
	case KindNotFound:
		return http.StatusNotFound
	case KindTooMany:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

func invalid(msg string) error { return &Error{Kind: KindInvalid, Msg: msg} }
