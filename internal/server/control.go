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
// client of its own, returned to be closed at shutdown), else in the
// process and cfg's control.state_file. A change flushes the over-limit
// cache of the generation serving then, and updates the orphan gauge.
func (a *App) newControl(cfg *config.Config) (*control.Controller, valkeygo.Client, error) {
	opts := control.Options{MaxEntries: cfg.Control.MaxEntries, Log: a.log, Now: a.opts.Now, OnChange: a.controlChanged}
	var conn valkeygo.Client
	if cfg.Store.Type == "valkey" {
		var err error
		if conn, err = controlClient(cfg.Store.Valkey); err != nil {
			return nil, nil, err
		}
		opts.Valkey = control.NewValkey(conn, cfg.Store.Valkey.KeyPrefix)
	} else {
		opts.StateFile = cfg.Control.StateFile
	}
	ctl, err := control.New(opts)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, nil, err
	}
	return ctl, conn, nil
}

// controlChanged runs after every change to the entries: a refusal the
// over-limit cache holds may no longer hold (an exemption, an override).
func (a *App) controlChanged() {
	if a.gens != nil {
		if c := a.gens.current().store.v.cache; c != nil {
			c.Flush()
		}
	}
	a.metrics.SetControlOrphans(a.proc.ctl.Orphans())
}

// controlClient connects to v for the control entries.
func controlClient(v config.Valkey) (valkeygo.Client, error) {
	opt := valkeygo.ClientOption{InitAddress: v.Addrs, Username: v.Username, Password: v.Password,
		Sentinel: valkeygo.SentinelOption{MasterSet: v.SentinelMaster}, DisableCache: true}
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
func (a *App) closeControl() {
	if a.proc.ctlConn != nil {
		a.proc.ctlConn.Close()
	}
}
