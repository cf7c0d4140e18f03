package server

import (
	"crypto/tls"
	"fmt"

	valkeygo "github.com/valkey-io/valkey-go"

	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/tlsutil"
)

// newControl builds the process's Controller (the operators' entries)
// for cfg at start: its entries in Valkey with the valkey store (over a
// client of its own, connected when first used), else in the process and
// cfg's control.state_file. A change flushes the over-limit cache of the
// generation serving then, and updates the orphan gauge.
func (a *App) newControl(cfg *config.Config) (*control.Controller, error) {
	opts := control.Options{MaxEntries: cfg.Control.MaxEntries, Log: a.log, Now: a.opts.Now, OnChange: a.controlChanged}
	if v := cfg.Store.Valkey; cfg.Store.Type == "valkey" {
		opts.Valkey = control.NewValkey(func() (valkeygo.Client, error) { return controlClient(v) }, v.KeyPrefix)
	} else {
		opts.StateFile = cfg.Control.StateFile
	}
	return control.New(opts)
}

// controlChanged runs after every change to the entries: a refusal the
// over-limit cache holds may no longer hold (an exemption, an override).
func (a *App) controlChanged() {
	if a.gens != nil {
		if c := a.gens.current().store.v.cache; c != nil {
			c.Flush()
		}
	}
	if a.proc.ctl != nil {
		a.metrics.SetControlOrphans(a.proc.ctl.Orphans())
	}
}

// controlClient connects to v for the control entries.
func controlClient(v config.Valkey) (valkeygo.Client, error) {
	opt := valkeygo.ClientOption{InitAddress: v.Addrs, Username: v.Username, Password: v.Password,
		Sentinel: valkeygo.SentinelOption{MasterSet: v.SentinelMaster}, DisableCache: true,
		// No resend on a new connection: valkey-go recycles a command once
		// a resend succeeds, while the broken connection's writer may still
		// be reading it (a data race the race detector caught in
		// TestStoreOutageWarnings). A failed read waits for the next sync.
		DisableRetry: true}
	if v.Timeout > 0 {
		opt.Dialer.Timeout = v.Timeout
		opt.ConnWriteTimeout = v.Timeout
	}
	if v.TLS {
		pool, err := tlsutil.CertPool(v.CAFile)
		if err != nil {
			return nil, fmt.Errorf("building valkey TLS: %w", err)
		}
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	c, err := valkeygo.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connecting to valkey for the control entries: %w", err)
	}
	return c, nil
}

// Control returns the process's Controller: the admin API sets, lists and
// deletes entries through it.
func (a *App) Control() *control.Controller { return a.proc.ctl }

// closeControl closes the Controller's Valkey client, if any.
func (a *App) closeControl() { a.proc.ctl.Close() }
