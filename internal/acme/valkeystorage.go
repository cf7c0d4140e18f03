package acme

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/valkey-io/valkey-go"
)

// Lock timing of ValkeyStorage: a lock lives lockTTL unless its holder
// refreshes it (every lockRefresh), so a crashed holder blocks the fleet
// for at most lockTTL; a waiter polls every lockPoll.
const (
	lockTTL     = 20 * time.Second
	lockRefresh = 5 * time.Second
	lockPoll    = 250 * time.Millisecond
)

// ValkeyStorage is certmagic.Storage over Valkey, for a fleet sharing one
// ACME account and certificate set: certmagic takes its locks around
// every order, so one instance obtains a name's certificate and the
// others load it. Every value is sealed with AES-256-GCM under a key
// derived from the secret, with its storage key as additional data (a
// value moved to another key does not open). All its keys share one
// Cluster hash tag ({acme}), so each change is one atomic script.
type ValkeyStorage struct {
	connect func() (valkey.Client, error)
	prefix  string // key_prefix + "{acme}:"
	aead    cipher.AEAD

	cmu    sync.Mutex
	client valkey.Client // nil until the first call that reaches the server

	mu    sync.Mutex
	locks map[string]heldLock // locks this process holds, by name
}

// heldLock is a lock this process holds: its token and its refresher's stop.
type heldLock struct {
	token string
	stop  chan struct{}
}

var _ certmagic.Storage = (*ValkeyStorage)(nil)

// NewValkeyStorage keeps certmagic's data under keyPrefix on the server
// connect reaches, sealed with secret (any length; SHA-256 makes the
// AES-256 key). connect is called at the first use and again after it
// fails: a Valkey down at start fails certmagic's calls (which it logs and
// retries), never the start.
func NewValkeyStorage(connect func() (valkey.Client, error), keyPrefix string, secret []byte) (*ValkeyStorage, error) {
	key := sha256.Sum256(secret)
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &ValkeyStorage{connect: connect, prefix: keyPrefix + "{acme}:", aead: aead, locks: map[string]heldLock{}}, nil
}

// conn returns the client, connecting first if need be.
func (s *ValkeyStorage) conn() (valkey.Client, error) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.client == nil {
		c, err := s.connect()
		if err != nil {
			return nil, fmt.Errorf("valkey storage: connecting: %w", err)
		}
		s.client = c
	}
	return s.client, nil
}

// Close closes the client, if one was connected.
func (s *ValkeyStorage) Close() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

func (s *ValkeyStorage) dataKey(key string) string { return s.prefix + "k:" + key }
func (s *ValkeyStorage) indexKey() string          { return s.prefix + "index" }
func (s *ValkeyStorage) lockKey(name string) string {
	return s.prefix + "lock:" + name
}

// storeScript writes a value with its modification time and lists its key.
var storeScript = valkey.NewLuaScript(`redis.call('HSET', KEYS[1], 'v', ARGV[1], 'm', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1`)

// deleteScript removes the values KEYS[2..] and their names ARGV from the
// index KEYS[1].
var deleteScript = valkey.NewLuaScript(`for i = 2, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[1], ARGV[i-1])
end
return 1`)

// unlockScript deletes a lock only while it holds the caller's token;
// refreshScript extends it likewise.
var (
	unlockScript  = valkey.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	refreshScript = valkey.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

// Store seals value and writes it at key.
func (s *ValkeyStorage) Store(ctx context.Context, key string, value []byte) error {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(value)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := s.aead.Seal(nonce, nonce, value, []byte(key))
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	c, err := s.conn()
	if err != nil {
		return err
	}
	err = storeScript.Exec(ctx, c, []string{s.dataKey(key), s.indexKey()}, []string{string(sealed), now, key}).Error()
	if err != nil {
		return fmt.Errorf("valkey storage: storing %s: %w", key, err)
	}
	return nil
}

// Load reads and opens the value at key; fs.ErrNotExist when absent.
func (s *ValkeyStorage) Load(ctx context.Context, key string) ([]byte, error) {
	c, err := s.conn()
	if err != nil {
		return nil, err
	}
	sealed, err := c.Do(ctx, c.B().Hget().Key(s.dataKey(key)).Field("v").Build()).AsBytes()
	if valkey.IsValkeyNil(err) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("valkey storage: loading %s: %w", key, err)
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, fmt.Errorf("valkey storage: %s: value too short to be sealed", key)
	}
	value, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(key))
	if err != nil {
		return nil, fmt.Errorf("valkey storage: %s does not open with storage_secret_env's secret (another secret, or altered): %w", key, err)
	}
	return value, nil
}

// Delete removes key and, as a directory, every key under it.
func (s *ValkeyStorage) Delete(ctx context.Context, key string) error {
	names, err := s.under(ctx, key, true)
	if err != nil {
		return err
	}
	names = append(names, key)
	keys := []string{s.indexKey()}
	for _, n := range names {
		keys = append(keys, s.dataKey(n))
	}
	c, err := s.conn()
	if err != nil {
		return err
	}
	if err := deleteScript.Exec(ctx, c, keys, names).Error(); err != nil {
		return fmt.Errorf("valkey storage: deleting %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a value or a directory of values.
func (s *ValkeyStorage) Exists(ctx context.Context, key string) bool {
	c, err := s.conn()
	if err != nil {
		return false
	}
	n, err := c.Do(ctx, c.B().Exists().Key(s.dataKey(key)).Build()).AsInt64()
	if err == nil && n > 0 {
		return true
	}
	names, err := s.under(ctx, key, true)
	return err == nil && len(names) > 0
}

// List lists the keys under dir: all of them when recursive, else its
// direct children (values and directories).
func (s *ValkeyStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	names, err := s.under(ctx, dir, recursive)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fs.ErrNotExist
	}
	return names, nil
}

// under lists the keys below dir (all, or its direct children), sorted.
func (s *ValkeyStorage) under(ctx context.Context, dir string, recursive bool) ([]string, error) {
	c, err := s.conn()
	if err != nil {
		return nil, err
	}
	all, err := c.Do(ctx, c.B().Smembers().Key(s.indexKey()).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("valkey storage: listing %s: %w", dir, err)
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	if dir == "" {
		prefix = ""
	}
	var out []string
	for _, k := range all {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || rest == "" {
			continue
		}
		if !recursive {
			first, _, _ := strings.Cut(rest, "/")
			k = path.Join(dir, first)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Stat describes key: a value (its size sealed, and when it was written)
// or a directory; fs.ErrNotExist when neither.
func (s *ValkeyStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	c, err := s.conn()
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	vals, err := c.Do(ctx, c.B().Hmget().Key(s.dataKey(key)).Field("m", "v").Build()).ToArray()
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("valkey storage: stat %s: %w", key, err)
	}
	if m, err := vals[0].AsInt64(); err == nil {
		v, _ := vals[1].AsBytes()
		return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(m), Size: int64(len(v)), IsTerminal: true}, nil
	}
	if s.Exists(ctx, key) {
		return certmagic.KeyInfo{Key: key}, nil
	}
	return certmagic.KeyInfo{}, fs.ErrNotExist
}

// Lock takes the fleet-wide lock name, waiting while another holder has
// it (polling every lockPoll) until ctx ends. A held lock is refreshed in
// the background until Unlock.
func (s *ValkeyStorage) Lock(ctx context.Context, name string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	token := hex.EncodeToString(b[:])
	key := s.lockKey(name)
	for {
		c, err := s.conn()
		if err != nil {
			return err
		}
		err = c.Do(ctx, c.B().Set().Key(key).Value(token).Nx().Px(lockTTL).Build()).Error()
		if err == nil {
			break
		}
		if !valkey.IsValkeyNil(err) { // nil: held by another
			return fmt.Errorf("valkey storage: locking %s: %w", name, err)
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	stop := make(chan struct{})
	s.mu.Lock()
	s.locks[name] = heldLock{token: token, stop: stop}
	s.mu.Unlock()
	go s.refresh(key, token, stop)
	return nil
}

// refresh extends a held lock every lockRefresh until stop is closed.
func (s *ValkeyStorage) refresh(key, token string, stop chan struct{}) {
	t := time.NewTicker(lockRefresh)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			c, err := s.conn()
			if err != nil {
				continue // the lock may lapse: certmagic re-checks storage after locking
			}
			ctx, cancel := context.WithTimeout(context.Background(), lockRefresh)
			_ = refreshScript.Exec(ctx, c, []string{key}, []string{token, strconv.FormatInt(lockTTL.Milliseconds(), 10)}).Error()
			cancel()
		}
	}
}

// Unlock releases the lock name this process holds (a lock that expired
// meanwhile and was taken by another holder is left to it).
func (s *ValkeyStorage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h, ok := s.locks[name]
	delete(s.locks, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("valkey storage: unlock %s: not locked by this process", name)
	}
	close(h.stop)
	c, err := s.conn()
	if err != nil {
		return err
	}
	if err := unlockScript.Exec(ctx, c, []string{s.lockKey(name)}, []string{h.token}).Error(); err != nil {
		return fmt.Errorf("valkey storage: unlocking %s: %w", name, err)
	}
	return nil
}
