package admin

import (
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"time"

	"rlproxy/internal/control"
)

// auditLine is one change in the audit log (docs/reference/operations.md,
// "Control API"). Entries name their client by its hashed id only: the
// raw key of a request never reaches the audit.
type auditLine struct {
	Time     time.Time      `json:"time"`
	Who      string         `json:"who"`
	Action   string         `json:"action"` // ban, exempt, override or delete
	ID       string         `json:"id"`
	Policy   string         `json:"policy"`
	Before   *control.Entry `json:"before"`
	After    *control.Entry `json:"after"`
	Reason   string         `json:"reason,omitempty"`
	Instance string         `json:"instance"`
	Remote   string         `json:"remote"`
}

// audit writes audit lines: to admin.audit_log, opened for each change
// (changes are rare; a file rotated away is simply created again) in
// append mode with 0600, or, without it, to the process log at info
// level ("control change").
type audit struct{ mu sync.Mutex }

// write appends l to path, or logs it when path is "". A file that
// cannot be written loses no record: the line goes to log, with the
// error.
func (a *audit) write(log *slog.Logger, path string, l *auditLine) {
	b, err := json.Marshal(l)
	if err != nil { // only time.Time out of range could fail
		log.Error("audit line not encoded", "err", err.Error())
		return
	}
	if path == "" {
		log.Info("control change", "audit", string(b))
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		log.Error("admin.audit_log not written; the line follows", "err", err.Error(), "audit", string(b))
	}
}
