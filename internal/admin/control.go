package admin

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"rlproxy/internal/config"
	"rlproxy/internal/control"
	"rlproxy/internal/proxy"
)

// ControlSource is what the control API (docs/reference/operations.md,
// "Control API") reads from and changes in the running process.
type ControlSource struct {
	// Entries holds the entries (control.Controller).
	Entries Controller
	// Runtime is the configuration served: its admin section says who may
	// read and change entries and where the audit goes.
	Runtime func() *proxy.Runtime
	// Changed counts one change (rlproxy_control_changes_total); action is
	// ban, exempt, override or delete.
	Changed func(action string)
	// Now stamps audit lines (time.Now when nil).
	Now func() time.Time
}

// Paging of GET /api/entries: limit's default and largest value.
const (
	DefaultListLimit = 100
	MaxListLimit     = control.MaxPage
)

// maxControlBody bounds a POST /api/entries body, in bytes.
const maxControlBody = 64 << 10

// controlAPI serves /api/entries.
type controlAPI struct {
	s        *Server
	src      ControlSource
	audit    audit
	instance string
}

// WithControl serves the control API on /api/entries: GET lists (paged)
// and gets entries under the admin page's access rule, or with any valid
// credential; POST sets and DELETE ends one, always authenticated (a
// basic_auth user or a write token), JSON, same-origin, and with their
// credentials only over TLS or loopback. Every change is audited.
func WithControl(src ControlSource) Option {
	return func(s *Server, mux *http.ServeMux) {
		if src.Now == nil {
			src.Now = time.Now
		}
		c := &controlAPI{s: s, src: src}
		c.instance, _ = os.Hostname()
		mux.Handle("GET /api/entries", c.gate(false, c.list))
		mux.Handle("GET /api/entries/{id}", c.gate(false, c.get))
		mux.Handle("POST /api/entries", c.gate(true, c.set))
		mux.Handle("DELETE /api/entries/{id}", c.gate(true, c.del))
	}
}

// gate applies the control API's access rules in order (Host, Origin,
// credentials and their transport, scope, content type), answering a
// refusal as problem+json, then calls h with who the caller is.
func (c *controlAPI) gate(change bool, h func(http.ResponseWriter, *http.Request, principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		cfg := &c.src.Runtime().Config.Admin
		p, ref := c.admit(r, cfg, change)
		if ref != nil {
			if ref.status == http.StatusUnauthorized {
				challenge(w, cfg)
			}
			problem(w, ref.status, ref.kind, ref.detail)
			return
		}
		h(w, r, p)
	})
}

// admit decides whether r may read (change false) or change entries.
func (c *controlAPI) admit(r *http.Request, cfg *config.Admin, change bool) (principal, *refusal) {
	if !c.s.hostAllowed(r, cfg.Hosts) {
		return principal{}, &refusal{http.StatusMisdirectedRequest, "unknown-host", "the Host header is neither localhost, an IP address, admin_listen's host, nor one of admin.hosts"}
	}
	if change && !sameOrigin(r) {
		return principal{}, &refusal{http.StatusForbidden, "cross-origin", "a change must come from the admin page's own origin"}
	}
	p, has, ok := c.s.authenticate(r, cfg)
	bearer := strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "bearer ")
	switch {
	case has && (bearer || change) && !private(r):
		return p, &refusal{http.StatusForbidden, "credentials-need-tls", "credentials are accepted only over TLS or on a loopback connection (an SSH tunnel, kubectl port-forward)"}
	case has && !ok:
		return p, &refusal{http.StatusUnauthorized, "unauthorized", "wrong credentials"}
	case !has && (change || cfg.BasicAuth != nil || !c.s.loopback):
		return p, &refusal{http.StatusUnauthorized, "unauthorized", "credentials required: admin.basic_auth or a token of admin.token_file"}
	case change && !p.write:
		return p, &refusal{http.StatusForbidden, "read-only", "token " + strconv.Quote(p.name) + " has the read scope; a change needs write"}
	case change && r.ContentLength != 0 && !isJSON(r):
		return p, &refusal{http.StatusUnsupportedMediaType, "json-required", "a change's body needs Content-Type: application/json"}
	}
	return p, nil
}

// isJSON reports whether r declares a JSON body (a form cannot: CSRF). A
// change without a body (a DELETE) needs no Content-Type: a form can send
// neither a DELETE nor a POST without a body to this API (POST decodes
// its body, and an empty one is refused), and a cross-origin DELETE is
// preflighted and refused by the Origin check.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// challenge names the credentials a 401 wants (RFC 9110 §11.6.1).
func challenge(w http.ResponseWriter, cfg *config.Admin) {
	if cfg.TokenFile != "" {
		w.Header().Add("WWW-Authenticate", `Bearer realm="rlproxy admin"`)
	}
	if cfg.BasicAuth != nil || cfg.TokenFile == "" {
		w.Header().Add("WWW-Authenticate", `Basic realm="rlproxy admin", charset="UTF-8"`)
	}
}

// list is GET /api/entries?policy=P&cursor=C&limit=N: one page of entries
// and the cursor of the next ("" after the last).
func (c *controlAPI) list(w http.ResponseWriter, r *http.Request, _ principal) {
	q := r.URL.Query()
	limit := DefaultListLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxListLimit {
			problem(w, http.StatusBadRequest, "invalid-entry", "limit "+strconv.Quote(s)+": want 1 to "+strconv.Itoa(MaxListLimit))
			return
		}
		limit = n
	}
	entries, next, err := c.src.Entries.List(r.Context(), q.Get("policy"), q.Get("cursor"), limit)
	if err != nil {
		controlFailed(w, err)
		return
	}
	if entries == nil {
		entries = []control.Entry{}
	}
	writeJSON(w, http.StatusOK, struct {
		Entries []control.Entry `json:"entries"`
		Next    string          `json:"next"`
	}{entries, next})
}

// get is GET /api/entries/{id}.
func (c *controlAPI) get(w http.ResponseWriter, r *http.Request, _ principal) {
	e, err := c.src.Entries.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		controlFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// set is POST /api/entries: 201 and the entry, its URL in Location; 200
// and the existing entry when an identical one applies already
// (control.Controller.Ensure), which is neither audited nor counted.
func (c *controlAPI) set(w http.ResponseWriter, r *http.Request, p principal) {
	var req control.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		problem(w, http.StatusBadRequest, "invalid-entry", "the body is not an entry: "+err.Error())
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		problem(w, http.StatusBadRequest, "invalid-entry", "the body holds more than one JSON value")
		return
	}
	e, created, err := c.src.Entries.Ensure(r.Context(), req, p.name)
	if err != nil {
		controlFailed(w, err)
		return
	}
	w.Header().Set("Location", "/api/entries/"+e.ID)
	if !created {
		writeJSON(w, http.StatusOK, e)
		return
	}
	c.record(r, p, e.Action, e.ID, e.Policy, nil, &e, req.Reason)
	writeJSON(w, http.StatusCreated, e)
}

// del is DELETE /api/entries/{id}: 200 and the entry as it was.
func (c *controlAPI) del(w http.ResponseWriter, r *http.Request, p principal) {
	before, err := c.src.Entries.Delete(r.Context(), r.PathValue("id"), p.name)
	if err != nil {
		controlFailed(w, err)
		return
	}
	c.record(r, p, "delete", before.ID, before.Policy, &before, nil, before.Reason)
	writeJSON(w, http.StatusOK, before)
}

// record audits and counts one change.
func (c *controlAPI) record(r *http.Request, p principal, action, id, policy string, before, after *control.Entry, reason string) {
	c.src.Changed(action)
	c.audit.write(c.s.log, c.src.Runtime().Config.Admin.AuditLog, &auditLine{
		Time: c.src.Now().UTC(), Who: p.name, Action: action, ID: id, Policy: policy,
		Before: before, After: after, Reason: reason, Instance: c.instance, Remote: r.RemoteAddr,
	})
}

// controlFailed answers a Controller error: a *control.Error with its
// status, any other (the store unreachable) with 503.
func controlFailed(w http.ResponseWriter, err error) {
	var ce *control.Error
	if !errors.As(err, &ce) {
		problem(w, http.StatusServiceUnavailable, "store-unavailable", err.Error())
		return
	}
	kind := map[control.Kind]string{control.KindNotFound: "entry-not-found", control.KindTooMany: "too-many-entries"}[ce.Kind]
	if kind == "" {
		kind = "invalid-entry"
	}
	problem(w, ce.Status(), kind, ce.Error())
}

// problem writes an RFC 9457 problem document of type
// urn:rlproxy:problem:KIND.
func problem(w http.ResponseWriter, status int, kind, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"urn:rlproxy:problem:" + kind, http.StatusText(status), status, detail})
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeJSON writes v as the JSON body of a status response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
