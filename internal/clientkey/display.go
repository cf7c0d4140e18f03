package clientkey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Display shows client ids to operators, the same way everywhere (the
// admin page, the refusal log): a credential's id is already a hash and is
// shortened (Redact); an address ("ip:192.0.2.7") is shown as it is only
// when asked, else as "ip#" and 12 hex digits of an HMAC-SHA256 keyed with
// a secret of the process, which tells clients apart without naming them:
// one client has one hash on the page and in the log, until a restart. It
// is safe for concurrent use.
type Display struct {
	secret [32]byte
}

// NewDisplay returns a Display with a fresh random secret.
func NewDisplay() *Display {
	d := &Display{}
	_, _ = rand.Read(d.secret[:]) // crypto/rand.Read never fails (Go 1.24+)
	return d
}

// Show returns how client id is shown; showIPs is admin.show_client_ips.
func (d *Display) Show(id string, showIPs bool) string {
	if !strings.HasPrefix(id, "ip:") || showIPs {
		return Redact(id)
	}
	m := hmac.New(sha256.New, d.secret[:])
	m.Write([]byte(id))
	return "ip#" + hex.EncodeToString(m.Sum(nil)[:6])
}
