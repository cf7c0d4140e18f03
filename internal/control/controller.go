package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rlproxy/internal/config"
)

// DefaultMaxEntries bounds the entries of one policy (or plan set) when
// control.max_entries is absent.
const DefaultMaxEntries = 100_000

// Options are a Controller's settings and collaborators.
type Options struct {
	// MaxEntries bounds the entries of one policy or plan set, orphans
	// included (control.max_entries); 0: DefaultMaxEntries.
	MaxEntries int
	// StateFile, with the memory store, is the file the entries are kept
	// in across restarts (control.state_file); "" keeps them in memory only.
	StateFile string
	// Valkey, when set, keeps the entries in Valkey, shared by a fleet.
	Valkey *Valkey
	// Now is the clock of creation times and expiries; nil: time.Now.
	Now func() time.Time
	// OnChange runs after every change to the applied entries (a set, a
	// delete or an expiry, this instance's or another's): the over-limit
	// cache's refusals may no longer hold.
	OnChange func()
	// Log receives warnings (a state file or a Valkey poll that failed);
	// nil discards them.
	Log *slog.Logger
}

// Controller holds the entries and their tables. It is safe for
// concurrent use; a nil *Controller has no entries.
type Controller struct {
	opts Options
	mu   sync.Mutex // serializes changes and Configure
	cfg  *config.Config
	recs map[string]*record // by id, every entry, orphans included
	// count is entries per table name (record.table), for MaxEntries.
	count   map[string]int
	orphans map[string]string // id → why it does not apply
	tabs    atomic.Pointer[tables]
	failing bool // the last Valkey poll failed (logged once per outage)
}

// tables are the Tables by policy and by plan set; the maps are replaced
// (copy on write) when a name is added, the Tables change in place.
type tables struct {
	policies map[string]*Table
	plans    map[string]*Table
}

// New returns a Controller; with a state file it reads the entries kept
// there (a missing file is an empty one), with Valkey the entries there
// (when it answers; else Run reads them once it does). It applies none
// until Configure.
func New(opts Options) (*Controller, error) {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{opts: opts, recs: map[string]*record{}, count: map[string]int{}, orphans: map[string]string{}}
	c.tabs.Store(&tables{policies: map[string]*Table{}, plans: map[string]*Table{}})
	var recs []*record
	if opts.Valkey == nil && opts.StateFile != "" {
		var err error
		if recs, err = readState(opts.StateFile); err != nil {
			return nil, err
		}
	}
	if opts.Valkey != nil {
		c.sync(context.Background()) // a Valkey down at start: Run reads the entries once it is back
	}
	for _, r := range recs {
		c.recs[r.ID] = r
	}
	return c, nil
}

// Table returns the table of policy name, nil when it has no entries.
func (c *Controller) Table(name string) *Table {
	if c == nil {
		return nil
	}
	return c.tabs.Load().policies[name]
}

// PlanTable returns the table of plan set name, nil when it has no entries.
func (c *Controller) PlanTable(name string) *Table {
	if c == nil {
		return nil
	}
	return c.tabs.Load().plans[name]
}

// Configure applies the entries under cfg (at start and on every reload):
// each is re-evaluated, an entry cfg orphans is kept and reported, never
// applied; none is dropped.
func (c *Controller) Configure(cfg *config.Config) {
	c.mu.Lock()
	c.cfg = cfg
	c.rebuild()
	c.mu.Unlock()
	c.changed()
}

// rebuild builds every table anew from the records (under mu).
func (c *Controller) rebuild() {
	c.tabs.Store(&tables{policies: map[string]*Table{}, plans: map[string]*Table{}})
	clear(c.count)
	clear(c.orphans)
	for _, r := range c.recs {
		c.apply(r)
	}
}

// apply adds r to the tables (or the orphans) and the counts (under mu).
func (c *Controller) apply(r *record) {
	c.recs[r.ID] = r
	c.count[r.table()]++
	if c.cfg == nil {
		return
	}
	if why := orphan(r, c.cfg); why != "" {
		c.orphans[r.ID] = why
		return
	}
	c.tableFor(r).add(r.Client, c.rule(r))
}

// unapply removes the record id from the tables and the counts (under
// mu); it returns the record, nil when there was none.
func (c *Controller) unapply(id string) *record {
	r := c.recs[id]
	if r == nil {
		return nil
	}
	delete(c.recs, id)
	if c.count[r.table()]--; c.count[r.table()] <= 0 {
		delete(c.count, r.table())
	}
	if _, orphaned := c.orphans[id]; orphaned {
		delete(c.orphans, id)
	} else if c.cfg != nil {
		c.tableFor(r).remove(r.Client, id)
	}
	return r
}

// tableFor returns r's table, adding it if new (under mu).
func (c *Controller) tableFor(r *record) *Table {
	cur := c.tabs.Load()
	m := cur.policies
	if r.PlanSet {
		m = cur.plans
	}
	if t := m[r.Policy]; t != nil {
		return t
	}
	t := newTable()
	next := &tables{policies: cur.policies, plans: cur.plans}
	m = maps.Clone(m)
	m[r.Policy] = t
	if r.PlanSet {
		next.plans = m
	} else {
		next.policies = m
	}
	c.tabs.Store(next)
	return t
}

// rule is r as the decision path reads it (r applies under c.cfg).
func (c *Controller) rule(r *record) *Rule {
	u := &Rule{ID: r.ID, Action: r.Action, Plan: r.Plan, Created: r.Created.UnixMilli(), rank: rankOf(r.Action)}
	if r.Expires != nil {
		u.Expires = r.Expires.UnixMilli()
	}
	if r.Action == ActionOverride && !r.PlanSet {
		u.Limit, _ = overrideLimit(r, c.cfg.Policies[r.Policy]) // orphan checked it
		u.HasLimit = true
	}
	return u
}

// errNotConfigured is Set's error before the first Configure.
var errNotConfigured = errors.New("control: no configuration applied yet")

// Set validates r and stores the entry it asks for, by the authenticated
// by (a user or token name, for the audit), unless an identical one
// applies already (Ensure). Errors: *Error for what r asks (invalid;
// too_many past control.max_entries), or the store's.
func (c *Controller) Set(ctx context.Context, r Request, by string) (Entry, error) {
	e, _, err := c.Ensure(ctx, r, by)
	return e, err
}

// Ensure is Set reporting whether it created the entry. When an applied,
// unexpired entry has r's policy (or plan set), client (source and id),
// action and fields (limit, window, rate, burst, plan), Ensure returns it
// and creates nothing (created false), whatever r's expires_in and
// reason: a repeated request (a retry after a lost answer) leaves one
// entry. With Valkey it sees the entries as of this instance's last Sync.
func (c *Controller) Ensure(ctx context.Context, r Request, by string) (e Entry, created bool, err error) {
	e, created, err = c.set(ctx, r, by)
	if created {
		c.changed()
	}
	return e, created, err
}

func (c *Controller) set(ctx context.Context, r Request, by string) (Entry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil {
		return Entry{}, false, errNotConfigured
	}
	rec, err := newRecord(r, by, c.cfg, c.opts.Now())
	if err != nil {
		return Entry{}, false, err
	}
	if same := c.same(rec); same != nil {
		return c.entry(same), false, nil
	}
	if c.count[rec.table()] >= c.opts.MaxEntries {
		return Entry{}, false, c.tooMany(rec)
	}
	rec.ID = newID()
	if v := c.opts.Valkey; v != nil {
		if !v.loaded {
			return Entry{}, false, errors.New("control: the entries in valkey are not read yet (is it reachable?)")
		}
		if err := v.put(ctx, rec, c.opts.MaxEntries); err != nil {
			if errors.Is(err, errFull) {
				return Entry{}, false, c.tooMany(rec)
			}
			return Entry{}, false, err
		}
	}
	c.apply(rec)
	if err := c.persist(); err != nil {
		c.unapply(rec.ID)
		return Entry{}, false, err
	}
	return c.entry(rec), true, nil
}

// same returns the applied, unexpired record identical to rec
// (record.sameAs), nil when there is none (under mu). Only the rules of
// rec's client in its table are looked at, so a Set costs the same among
// a million entries.
func (c *Controller) same(rec *record) *record {
	cur := c.tabs.Load()
	t := cur.policies[rec.Policy]
	if rec.PlanSet {
		t = cur.plans[rec.Policy]
	}
	if t == nil {
		return nil
	}
	now := c.opts.Now()
	for _, id := range t.chain(rec.Client) {
		if o := c.recs[id]; o != nil && !o.expired(now) && o.sameAs(rec) {
			return o
		}
	}
	return nil
}

func (c *Controller) tooMany(rec *record) error {
	return &Error{Kind: KindTooMany, Msg: fmt.Sprintf("%s holds %d entries, the most control.max_entries allows", rec.Policy, c.opts.MaxEntries)}
}

// Delete removes entry id, by the authenticated by, and returns it as it
// was. Errors: *Error not_found, or the store's.
func (c *Controller) Delete(ctx context.Context, id, by string) (Entry, error) {
	e, err := c.delete(ctx, id)
	if err == nil {
		c.changed()
	}
	return e, err
}

func (c *Controller) delete(ctx context.Context, id string) (Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.recs[id]
	if rec == nil || rec.expired(c.opts.Now()) {
		return Entry{}, notFound(id)
	}
	if v := c.opts.Valkey; v != nil {
		if err := v.del(ctx, id); err != nil {
			return Entry{}, err
		}
	}
	before := c.entry(rec)
	c.unapply(id)
	if err := c.persist(); err != nil {
		c.apply(rec)
		return Entry{}, err
	}
	return before, nil
}

func notFound(id string) error {
	return &Error{Kind: KindNotFound, Msg: fmt.Sprintf("no entry %q", id)}
}

// Get returns entry id. Errors: *Error not_found.
func (c *Controller) Get(_ context.Context, id string) (Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.recs[id]
	if rec == nil || rec.expired(c.opts.Now()) {
		return Entry{}, notFound(id)
	}
	return c.entry(rec), nil
}

// MaxPage bounds List's limit.
const MaxPage = 1000

// List returns the entries of policy (or plan set; "" every one) in id
// order after cursor (an id; "" from the first), at most limit (1 ≤
// limit ≤ MaxPage; 0: 100), and the cursor of the next page ("" when
// this one is the last). Expired entries are not listed.
func (c *Controller) List(_ context.Context, policy, cursor string, limit int) ([]Entry, string, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > MaxPage {
		return nil, "", invalid(fmt.Sprintf("limit: want 1 to %d", MaxPage))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	var ids []string
	for id, r := range c.recs {
		if id > cursor && (policy == "" || r.Policy == policy) && !r.expired(now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids, next = ids[:limit], ids[limit-1]
	}
	out := make([]Entry, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.entry(c.recs[id]))
	}
	return out, next, nil
}

// Orphans is the number of entries that do not apply.
func (c *Controller) Orphans() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.orphans)
}

// entry is r as the API shows it (under mu).
func (c *Controller) entry(r *record) Entry {
	var secret []byte
	if c.cfg != nil {
		secret = c.cfg.Store.HashSecret
	}
	return Entry{ID: r.ID, Policy: r.Policy, Source: r.Source, Client: display(r.Client, secret),
		Action: r.Action, Limit: r.Limit, Window: r.Window, Rate: r.Rate, Burst: r.Burst, Plan: r.Plan,
		Reason: r.Reason, By: r.By, Created: r.Created, Expires: r.Expires, Orphan: c.orphans[r.ID]}
}

// sweep removes the expired entries (under mu); it reports whether it
// removed any.
func (c *Controller) sweep(ctx context.Context) bool {
	now := c.opts.Now()
	var gone []string
	for id, r := range c.recs {
		if r.expired(now) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return false
	}
	for _, id := range gone {
		if v := c.opts.Valkey; v != nil {
			if err := v.del(ctx, id); err != nil {
				c.opts.Log.Warn("control: removing an expired entry from valkey failed", "id", id, "err", err)
				continue
			}
		}
		c.unapply(id)
	}
	if err := c.persist(); err != nil {
		c.opts.Log.Warn("control: writing the state file failed", "err", err)
	}
	return true
}

// persist writes the state file, if any (under mu).
func (c *Controller) persist() error {
	if c.opts.StateFile == "" || c.opts.Valkey != nil {
		return nil
	}
	return writeState(c.opts.StateFile, slices.Collect(maps.Values(c.recs)))
}

func (c *Controller) changed() {
	if c.opts.OnChange != nil {
		c.opts.OnChange()
	}
}

// Close closes the Valkey connection, if any.
func (c *Controller) Close() {
	if c != nil && c.opts.Valkey != nil {
		c.opts.Valkey.close()
	}
}

// newID is a fresh entry id: 16 hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
