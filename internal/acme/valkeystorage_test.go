package acme

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/pebble"
	"rlproxy/internal/testutil/redisserver"
)

const testSecret = "0123456789abcdef-test-secret"

// TestValkeyStorage checks the storage's own contract against a real
// server: values round-trip sealed (no plaintext in Valkey, another
// secret cannot open them), directories list and delete, and a lock
// excludes a second holder until it is released.
func TestValkeyStorage(t *testing.T) {
	srv := redisserver.Start(t)
	connect := func() (valkey.Client, error) { return srv.Client(t), nil }
	s, err := NewValkeyStorage(connect, "rl:", []byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "certificates/ca/a.test/a.test.key"
	secretPEM := []byte("-----BEGIN EC PRIVATE KEY-----\nsecret\n")
	for _, k := range []string{key, "certificates/ca/a.test/a.test.crt", "certificates/ca/b.test/b.test.crt", "acme/ca/users/x/x.json"} {
		if err := s.Store(ctx, k, append([]byte(k+":"), secretPEM...)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Load(ctx, key)
	if err != nil || string(got) != key+":"+string(secretPEM) {
		t.Fatalf("Load = %q, %v", got, err)
	}
	raw := srv.Do(t, "HGET", "rl:{acme}:k:"+key, "v")
	if b, err := raw.AsBytes(); err != nil || strings.Contains(string(b), "PRIVATE KEY") || len(b) != 12+len(got)+16 {
		t.Errorf("stored value %q (%v): want nonce, ciphertext and tag only", b, err)
	}
	other, _ := NewValkeyStorage(connect, "rl:", []byte("another secret, 16+ bytes"))
	if _, err := other.Load(ctx, key); err == nil || !strings.Contains(err.Error(), "storage_secret_env") {
		t.Errorf("Load with another secret: %v, want an error naming storage_secret_env", err)
	}
	if _, err := s.Load(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	list, err := s.List(ctx, "certificates/ca", false)
	if want := []string{"certificates/ca/a.test", "certificates/ca/b.test"}; err != nil || !slices.Equal(list, want) {
		t.Errorf("List = %v, %v; want %v", list, err, want)
	}
	if info, err := s.Stat(ctx, "certificates/ca"); err != nil || info.IsTerminal {
		t.Errorf("Stat(dir) = %+v, %v; want a directory", info, err)
	}
	if info, err := s.Stat(ctx, key); err != nil || !info.IsTerminal || time.Since(info.Modified) > time.Minute {
		t.Errorf("Stat(key) = %+v, %v", info, err)
	}
	if err := s.Delete(ctx, "certificates/ca/a.test"); err != nil {
		t.Fatal(err)
	}
	if s.Exists(ctx, key) || s.Exists(ctx, "certificates/ca/a.test") || !s.Exists(ctx, "certificates/ca") {
		t.Errorf("after deleting a.test: Exists(key) %v, want false; the rest of certificates/ca stays", s.Exists(ctx, key))
	}

	if err := s.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if err := other.Lock(short, "issue_cert_a.test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while held = %v, want it to wait until its deadline", err)
	}
	if err := s.Unlock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if ttl, _ := srv.Do(t, "PTTL", "rl:{acme}:lock:issue_cert_a.test").AsInt64(); ttl <= 0 || ttl > lockTTL.Milliseconds() {
		t.Errorf("lock PTTL %d ms, want (0, %d]", ttl, lockTTL.Milliseconds())
	}
	if err := other.Unlock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
}

// TestValkeyFleetOneCertificate starts two instances sharing Valkey
// storage at once: one orders (pebble logs one order), the other waits on
// the storage lock and loads the same certificate, and the account and
// keys are sealed in Valkey.
func TestValkeyFleetOneCertificate(t *testing.T) {
	srv := redisserver.Start(t)
	e := newEnv(t, pebble.Options{})
	name := testNames[0]
	conf := func(httpListen string) *config.ACME {
		return &config.ACME{Domains: []string{name}, CA: e.pebble.DirURL, CARoot: e.pebble.RootFile,
			Challenges: []string{config.ChallengeHTTP01}, Storage: config.StorageValkey,
			StorageSecret: []byte(testSecret), HTTPListen: httpListen}
	}
	opts := Options{Valkey: config.Valkey{Addrs: []string{srv.Addr}, KeyPrefix: "rl:"}}
	// Instance A holds the ports pebble validates on; B's challenge, if
	// B orders, is answered by A from the shared storage.
	addrs := []string{e.tlsAddr, netutil.FreeAddr(t)}
	httpAddrs := []string{e.httpAddr, netutil.FreeAddr(t)}
	// Start returns at once (certificates are obtained in the
	// background), so the two race for the order.
	for i := range addrs {
		e.start(t, conf(httpAddrs[i]), addrs[i], nil, opts)
	}
	roots := e.pebble.Roots(t)
	a := waitServed(t, addrs[0], name, roots, e.log)
	b := waitServed(t, addrs[1], name, roots, e.log)
	if a.SerialNumber.Cmp(b.SerialNumber) != 0 {
		t.Errorf("instances serve serials %v and %v, want one certificate", a.SerialNumber, b.SerialNumber)
	}
	if n := e.pebble.Orders(); n != 1 {
		t.Errorf("pebble logged %d orders, want 1:\n%s", n, e.pebble.Log())
	}
	keys, err := srv.Do(t, "KEYS", "rl:{acme}:k:*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, k := range keys {
		v, _ := srv.Do(t, "HGET", k, "v").AsBytes()
		if strings.Contains(string(v), "PRIVATE KEY") || strings.Contains(string(v), "CERTIFICATE") {
			t.Errorf("%s holds plaintext PEM", k)
		}
		if strings.HasSuffix(k, ".key") {
			sealed++
		}
	}
	if sealed < 2 { // the account's key and the certificate's
		t.Errorf("%d private keys in Valkey (%v), want 2", sealed, keys)
	}
}

// TestValkeyDownAtStart: a Manager on a Valkey that is not there starts
// (nothing fails before certmagic's first call), and each storage call
// fails with the connection's error until the server is up.
func TestValkeyDownAtStart(t *testing.T) {
	c := &config.ACME{Domains: []string{"a.example.com"}, CA: "https://127.0.0.1:1/dir",
		Challenges: []string{config.ChallengeTLSALPN01}, Storage: config.StorageValkey, StorageSecret: []byte(testSecret)}
	dead := netutil.FreeAddr(t)
	m, err := New(c, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Static: func() *tls.Certificate { return nil },
		Valkey: config.Valkey{Addrs: []string{dead}, KeyPrefix: "rl:"}})
	if err != nil {
		t.Fatalf("New with Valkey down: %v", err)
	}
	defer m.Close()
	if err := m.Start(); err != nil {
		t.Fatalf("Start with Valkey down: %v", err)
	}
	if _, err := m.vs.Load(context.Background(), "x"); err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "connecting") {
		t.Errorf("Load with Valkey down: %v, want the connection's error", err)
	}
}
