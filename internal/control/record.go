package control

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"rlproxy/internal/clientkey"
	"rlproxy/internal/config"
)

// record is an entry as stored (the state file's and Valkey's JSON): the
// client's id (a hashed credential "h:…", "ip:ADDR" or "cidr:PREFIX")
// beside the source it was named by and the fingerprint of the hash
// secret it was hashed with, so that a changed key source or a rotated
// secret makes it an orphan rather than someone else's entry.
type record struct {
	ID      string     `json:"id"`
	Policy  string     `json:"policy"`
	PlanSet bool       `json:"plan_set,omitempty"` // Policy names a plan set
	Source  string     `json:"source"`
	Client  string     `json:"client"`
	Secret  string     `json:"secret,omitempty"` // secretPrint of the hash secret (hashed ids only)
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
}

// table is the name of the table r applies in (Controller.Table).
func (r *record) table() string { return tableName(r.Policy, r.PlanSet) }

// tableName names the table of a policy, or of a plan set ("plans/NAME":
// "/" is in no policy name).
func tableName(name string, planSet bool) string {
	if planSet {
		return "plans/" + name
	}
	return name
}

// sameAs reports whether r and o are the same entry but for their id,
// author, reason, creation and expiry: the same policy (or plan set),
// client (source, id and hash secret), action and fields.
func (r *record) sameAs(o *record) bool {
	return r.Policy == o.Policy && r.PlanSet == o.PlanSet && r.Source == o.Source &&
		r.Client == o.Client && r.Secret == o.Secret && r.Action == o.Action &&
		sameInt(r.Limit, o.Limit) && r.Window == o.Window && r.Rate == o.Rate &&
		sameInt(r.Burst, o.Burst) && r.Plan == o.Plan
}

// sameInt reports whether a and b are both unset or hold the same value.
func sameInt(a, b *int64) bool { return a == b || a != nil && b != nil && *a == *b }

// expired reports whether r has expired at now.
func (r *record) expired(now time.Time) bool { return r.Expires != nil && !now.Before(*r.Expires) }

// secretPrint fingerprints a hash secret: 8 bytes of HMAC-SHA256 keyed
// with it over a fixed label, which tells secrets apart without naming them.
func secretPrint(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("rlproxy control entry"))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// display is the client's display id (Entry.Client).
func display(client string, secret []byte) string {
	if strings.HasPrefix(client, "h:") || strings.HasPrefix(client, "t:") {
		return clientkey.Redact(client)
	}
	kind, _, _ := strings.Cut(client, ":")
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(client))
	return kind + "#" + hex.EncodeToString(m.Sum(nil)[:6])
}

// keyedBy returns the sources a policy (or a plan set) is keyed by and
// whether it combines them.
func keyedBy(cfg *config.Config, name string, planSet bool) (config.KeySpec, bool) {
	if planSet {
		if ps := cfg.Plans[name]; ps != nil {
			return ps.Key, true
		}
		return config.KeySpec{}, false
	}
	if p := cfg.Policies[name]; p != nil {
		return p.Key, true
	}
	return config.KeySpec{}, false
}

// resolveClient turns a request's source and raw key into the stored
// source and client id for spec (the policy's key), hashing a credential
// with secret.
func resolveClient(spec config.KeySpec, source, key string, cfg *config.Config) (src, client string, err error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", "", invalid("key: required (the raw value: an address, a prefix or a credential)")
	}
	if source == "" {
		switch {
		case spec.Combine:
			return "", "", invalid("source: the policy combines several sources into its key; name the client by ip, cidr or one of its sources")
		case len(spec.Sources) == 0 || spec.Sources[0].Kind == config.SourceIP:
			source = SourceIP
		default:
			source = spec.Sources[0].String()
		}
	}
	switch source {
	case SourceIP:
		a, err := netip.ParseAddr(key)
		if err != nil {
			return "", "", invalid(fmt.Sprintf("key: %q is not an IP address", key))
		}
		return SourceIP, "ip:" + a.Unmap().WithZone("").String(), nil
	case SourceCIDR:
		p, err := netip.ParsePrefix(key)
		if err != nil {
			return "", "", invalid(fmt.Sprintf("key: %q is not a CIDR prefix", key))
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return SourceCIDR, "cidr:" + p.Masked().String(), nil
	}
	s, perr := config.ParseSource(source)
	if perr != nil {
		return "", "", invalid(fmt.Sprintf("source: %q: %v", source, perr))
	}
	if msg := notKeyedBy(spec, s); msg != "" {
		return "", "", invalid("source: " + msg)
	}
	id, err := hashCredential(s, key, cfg)
	if err != nil {
		return "", "", err
	}
	return s.String(), id, nil
}

// notKeyedBy says why spec's policy cannot be named by credential source
// s ("" when it can).
func notKeyedBy(spec config.KeySpec, s config.Source) string {
	switch {
	case s.Kind == config.SourceIP || s.Kind == config.SourceGlobal:
		return fmt.Sprintf("%q names no client; use ip or cidr", s.String())
	case spec.Combine:
		return "the policy combines several sources into its key"
	}
	for _, k := range spec.Sources {
		if k == s {
			return ""
		}
	}
	return fmt.Sprintf("the policy is not keyed by %s", s.String())
}

// hashCredential is the id a request carrying key in source s gets (as
// clientkey.Extractor.Key would give it).
func hashCredential(s config.Source, key string, cfg *config.Config) (string, error) {
	ex, err := clientkey.New(config.KeySpec{Sources: []config.Source{s}}, cfg.JWT, cfg.Store.HashSecret)
	if err != nil {
		return "", invalid(fmt.Sprintf("source: %v", err))
	}
	sums := ex.Credentials(nil, key)
	if len(sums) != 1 {
		return "", invalid(fmt.Sprintf("source: %q is not a credential source", s.String()))
	}
	return "h:" + hex.EncodeToString(sums[0][:]), nil
}

// orphan says why r no longer applies under cfg ("" when it applies).
func orphan(r *record, cfg *config.Config) string {
	spec, ok := keyedBy(cfg, r.Policy, r.PlanSet)
	switch {
	case !ok && r.PlanSet:
		return "plan set removed"
	case !ok:
		return "policy removed"
	case r.PlanSet && r.Plan != "" && cfg.Plans[r.Policy].Plans[r.Plan] == nil:
		return "plan removed"
	case r.Source == SourceIP || r.Source == SourceCIDR:
	case r.Secret != secretPrint(cfg.Store.HashSecret):
		return "hash secret rotated"
	default:
		s, err := config.ParseSource(r.Source)
		if err != nil || notKeyedBy(spec, s) != "" {
			return "key source changed"
		}
	}
	if r.Action == ActionOverride && !r.PlanSet {
		if _, err := overrideLimit(r, cfg.Policies[r.Policy]); err != nil {
			return "override no longer fits: " + err.Error()
		}
	}
	return ""
}
