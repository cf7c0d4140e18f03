package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// Valkey keeps the entries in Valkey, under one hash tag ({ctl}, one
// Cluster slot, so each change is one atomic script):
//
//	PREFIX{ctl}:e    hash: id → the entry's JSON
//	PREFIX{ctl}:n    hash: table → entries
//	PREFIX{ctl}:v    the version, incremented by every change
//	PREFIX{ctl}:log  sorted set: "VERSION:ID" scored by version, the last logKeep changes
//	PREFIX{ctl}:changed  the channel every change is published on
//
// Every instance subscribes to the channel and, on a message, reads only
// the entries the log names since its own version (Controller.Run); it
// also polls the version every PollEvery, so a message lost with a
// connection delays a change by one poll at most. A gap (it fell more
// than logKeep changes behind) reads every entry.
type Valkey struct {
	dial                 func() (valkeygo.Client, error)
	mu                   sync.Mutex // guards conn
	conn                 valkeygo.Client
	entries, counts, ver string
	log, channel         string
	version              uint64 // the last version applied (Controller.mu)
	loaded               bool   // every entry was read once (Controller.mu)
}

// logKeep is how many changes the log keeps.
const logKeep = 10_000

// NewValkey returns a Valkey connecting with dial when first used (a
// Valkey down at start delays the entries, never the start), its keys
// under prefix (store.valkey.key_prefix). Controller.Close closes it.
func NewValkey(dial func() (valkeygo.Client, error), prefix string) *Valkey {
	p := prefix + "{ctl}:"
	return &Valkey{dial: dial, entries: p + "e", counts: p + "n", ver: p + "v", log: p + "log", channel: p + "changed"}
}

// errFull is put's error when the table holds its maximum.
var errFull = errors.New("control: table full")

var putScript = valkeygo.NewLuaScript(`
local n = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '0')
if n >= tonumber(ARGV[4]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
local v = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[4], v, v .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -` + strconv.Itoa(logKeep+1) + `)
redis.call('PUBLISH', ARGV[5], v)
return v`)

var delScript = valkeygo.NewLuaScript(`
local j = redis.call('HGET', KEYS[1], ARGV[1])
if not j then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local t = cjson.decode(j)
local name = t.policy
if t.plan_set then name = 'plans/' .. name end
if redis.call('HINCRBY', KEYS[2], name, -1) <= 0 then redis.call('HDEL', KEYS[2], name) end
local v = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[4], v, v .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -` + strconv.Itoa(logKeep+1) + `)
redis.call('PUBLISH', ARGV[5], v)
return v`)

// client returns the connection, dialing it if there is none yet.
func (v *Valkey) client() (valkeygo.Client, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn == nil {
		c, err := v.dial()
		if err != nil {
			return nil, err
		}
		v.conn = c
	}
	return v.conn, nil
}

// close closes the connection, if any.
func (v *Valkey) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn != nil {
		v.conn.Close()
		v.conn = nil
	}
}

func (v *Valkey) keys() []string { return []string{v.entries, v.counts, v.ver, v.log} }

// put stores rec unless its table holds max entries (errFull).
func (v *Valkey) put(ctx context.Context, rec *record, max int) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	c, err := v.client()
	if err != nil {
		return err
	}
	n, err := putScript.Exec(ctx, c, v.keys(), []string{rec.ID, string(b), rec.table(), strconv.Itoa(max), v.channel}).AsInt64()
	if err != nil {
		return fmt.Errorf("control: storing the entry in valkey: %w", err)
	}
	if n < 0 {
		return errFull
	}
	return nil
}

// del removes entry id (nothing when it is gone already).
func (v *Valkey) del(ctx context.Context, id string) error {
	c, err := v.client()
	if err != nil {
		return err
	}
	if err := delScript.Exec(ctx, c, v.keys(), []string{id, "", "", "", v.channel}).Error(); err != nil {
		return fmt.Errorf("control: removing the entry from valkey: %w", err)
	}
	return nil
}

// loadAll reads every entry and the version they are at.
func (v *Valkey) loadAll(ctx context.Context) ([]*record, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	ver, err := c.Do(ctx, c.B().Get().Key(v.ver).Build()).AsUint64()
	if err != nil && !valkeygo.IsValkeyNil(err) {
		return nil, fmt.Errorf("control: reading the entries' version from valkey: %w", err)
	}
	m, err := c.Do(ctx, c.B().Hgetall().Key(v.entries).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("control: reading the entries from valkey: %w", err)
	}
	recs := make([]*record, 0, len(m))
	for id, j := range m {
		r, err := decodeRecord(id, j)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	v.version, v.loaded = ver, true
	return recs, nil
}

func decodeRecord(id, j string) (*record, error) {
	var r record
	if err := json.Unmarshal([]byte(j), &r); err != nil || r.ID != id {
		return nil, fmt.Errorf("control: entry %q in valkey is malformed", id)
	}
	return &r, nil
}

// change is one entry changed since a version: its record now, nil when
// it was removed.
type change struct {
	id  string
	rec *record
}

// since returns the changes after v.version (full: every entry, the log
// no longer reaching back to it) and the version they bring; none when
// the version is unchanged.
func (v *Valkey) since(ctx context.Context) (chs []change, full []*record, ver uint64, err error) {
	if !v.loaded {
		full, err = v.loadAll(ctx)
		return nil, full, v.version, err
	}
	c, err := v.client()
	if err != nil {
		return nil, nil, 0, err
	}
	ver, err = c.Do(ctx, c.B().Get().Key(v.ver).Build()).AsUint64()
	if valkeygo.IsValkeyNil(err) {
		ver, err = 0, nil
	}
	if err != nil || ver == v.version {
		return nil, nil, ver, err
	}
	zs, err := c.Do(ctx, c.B().Zrangebyscore().Key(v.log).Min("("+strconv.FormatUint(v.version, 10)).Max("+inf").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, nil, 0, err
	}
	if ver < v.version || len(zs) == 0 || uint64(zs[0].Score) != v.version+1 {
		full, err = v.loadAll(ctx)
		return nil, full, v.version, err
	}
	seen := map[string]bool{}
	for _, z := range zs {
		_, id, _ := strings.Cut(z.Member, ":")
		if seen[id] {
			continue
		}
		seen[id] = true
		j, err := c.Do(ctx, c.B().Hget().Key(v.entries).Field(id).Build()).ToString()
		switch {
		case valkeygo.IsValkeyNil(err):
			chs = append(chs, change{id: id})
		case err != nil:
			return nil, nil, 0, err
		default:
			r, err := decodeRecord(id, j)
			if err != nil {
				return nil, nil, 0, err
			}
			chs = append(chs, change{id: id, rec: r})
		}
	}
	return chs, nil, uint64(zs[len(zs)-1].Score), nil
}

// subscribe calls kick on every change published until ctx ends,
// subscribing again (after resubscribeAfter) when the connection breaks.
func (v *Valkey) subscribe(ctx context.Context, kick func()) {
	for ctx.Err() == nil {
		if c, err := v.client(); err == nil {
			_ = c.Receive(ctx, c.B().Subscribe().Channel(v.channel).Build(), func(valkeygo.PubSubMessage) { kick() })
		}
		select {
		case <-ctx.Done():
		case <-time.After(resubscribeAfter):
		}
	}
}

// resubscribeAfter is the pause before subscribing again after the
// subscription's connection broke (polling covers the gap).
const resubscribeAfter = time.Second
