package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"rlproxy/internal/admin"
	"rlproxy/internal/control"
	"rlproxy/internal/tlsutil"
)

// ctlUsage is `rlproxy ctl`'s own help.
const ctlUsage = `usage: rlproxy ctl VERB [-admin URL] [-token-file F] [-ca-file F] [flags]
  list     [-policy P] [-limit N] [-json]            the entries, every page (N a page)
  ban      -policy P -key K [-source S] [-for D] [-reason R]
  exempt   -policy P -key K [-source S] [-for D] [-reason R]
  override -policy P -key K [-source S] (-limit N -window W | -rate R -burst B | -plan NAME) [-for D] [-reason R]
  delete   ID
-admin: the admin listener's URL (default http://127.0.0.1:9090; http://USER:PASSWORD@HOST:PORT
for admin.basic_auth; https:// with admin.tls, -ca-file trusting its certificate). The bearer token: -token-file F (the token alone, or a name:token[:scope]
line of admin.token_file), else RLPROXY_ADMIN_TOKEN. -source: ip, cidr or a key source such as
header:X-API-Key (default: the policy's own key). -for: how long the entry lasts (default: until
deleted).
`

// ctlClient calls one admin listener's control API.
type ctlClient struct {
	base  string
	token string
	http  *http.Client
}

// ctlFlags are the flags every verb takes.
type ctlFlags struct {
	admin, tokenFile, caFile *string
}

func addCtlFlags(fs *flag.FlagSet) ctlFlags {
	return ctlFlags{
		admin:     fs.String("admin", "http://127.0.0.1:9090", "the admin listener's base URL"),
		tokenFile: fs.String("token-file", "", "file holding the bearer token (default: RLPROXY_ADMIN_TOKEN)"),
		caFile:    fs.String("ca-file", "", "PEM bundle trusted for an https:// -admin (admin.tls); default: the system's"),
	}
}

// client builds the client the flags name.
func (f ctlFlags) client() (*ctlClient, error) {
	tok := os.Getenv("RLPROXY_ADMIN_TOKEN")
	if *f.tokenFile != "" {
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return nil, err
		}
		tok = tokenOf(string(b))
		if tok == "" {
			return nil, fmt.Errorf("%s: no token in it", *f.tokenFile)
		}
	}
	u, err := url.Parse(*f.admin)
	if err != nil {
		return nil, fmt.Errorf("-admin: %w", err)
	}
	if tok != "" && !tokenSafe(u) {
		return nil, fmt.Errorf("-admin %s: a bearer token goes only over https:// or to a loopback address "+
			"(the admin listener refuses it otherwise, once it has crossed the network in clear)", *f.admin)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if *f.caFile != "" {
		pool, err := tlsutil.CertPool(*f.caFile)
		if err != nil {
			return nil, err
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}
	}
	return &ctlClient{base: strings.TrimSuffix(*f.admin, "/"), token: tok, http: hc}, nil
}

// tokenSafe reports whether a bearer token may be sent to u: over TLS,
// or to a loopback address (an SSH tunnel, kubectl port-forward), the
// transports the control API accepts credentials on.
func tokenSafe(u *url.URL) bool {
	if u.Scheme == "https" {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// tokenOf reads a token file: its first line that is neither blank nor a
// comment, either the token or a name:token[:scope] line.
func tokenOf(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if _, rest, ok := strings.Cut(line, ":"); ok {
			line, _, _ = strings.Cut(rest, ":")
		}
		return line
	}
	return ""
}

// do sends a request with body as JSON (none when nil) and decodes a
// success into out; a refusal is an error of its problem's detail.
func (c *ctlClient) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var p struct{ Type, Detail string }
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return fmt.Errorf("%s %s: %d %s (%s)", method, path, resp.StatusCode, p.Detail, p.Type)
		}
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

// cmdCtl runs `rlproxy ctl VERB ...` against the control API.
func cmdCtl(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, ctlUsage)
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("ctl "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ctlUsage) }
	cf := addCtlFlags(fs)
	var run func(c *ctlClient) error
	switch verb {
	case "list":
		run = ctlList(fs, stdout)
	case "ban", "exempt", "override":
		run = ctlSet(fs, verb, stdout)
	case "delete":
		run = func(c *ctlClient) error {
			var before control.Entry
			if err := c.do(http.MethodDelete, "/api/entries/"+url.PathEscape(fs.Arg(0)), nil, &before); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted %s (%s of %s on policy %s)\n", before.ID, before.Action, before.Client, before.Policy)
			return nil
		}
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, ctlUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "rlproxy ctl: unknown verb %q\n%s", verb, ctlUsage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if want := map[bool]int{true: 1, false: 0}[verb == "delete"]; fs.NArg() != want {
		fmt.Fprintf(stderr, "rlproxy ctl %s: want %d argument(s), got %q\n%s", verb, want, fs.Args(), ctlUsage)
		return 2
	}
	c, err := cf.client()
	if err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rlproxy ctl %s: %v\n", verb, err)
		return 1
	}
	return 0
}

// ctlList adds list's flags to fs; the function it returns prints every
// page as a table, or as one JSON array with -json.
func ctlList(fs *flag.FlagSet, stdout io.Writer) func(*ctlClient) error {
	policy := fs.String("policy", "", "only this policy's entries")
	limit := fs.Int("limit", admin.DefaultListLimit, "entries a page")
	asJSON := fs.Bool("json", false, "print the entries as a JSON array")
	return func(c *ctlClient) error {
		all := []control.Entry{}
		cursor := ""
		for {
			var page struct {
				Entries []control.Entry `json:"entries"`
				Next    string          `json:"next"`
			}
			q := url.Values{"policy": {*policy}, "cursor": {cursor}, "limit": {fmt.Sprint(*limit)}}
			if err := c.do(http.MethodGet, "/api/entries?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			all = append(all, page.Entries...)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if *asJSON {
			b, _ := json.MarshalIndent(all, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPOLICY\tACTION\tCLIENT\tSOURCE\tEXPIRES\tBY\tREASON\tORPHAN")
		for _, e := range all {
			exp := "never"
			if e.Expires != nil {
				exp = e.Expires.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%q\t%s\n", e.ID, e.Policy, e.Action, e.Client, e.Source, exp, e.By, e.Reason, e.Orphan)
		}
		return tw.Flush()
	}
}

// ctlSet adds the flags of ban, exempt and override to fs; the function
// it returns posts the entry and prints its id.
func ctlSet(fs *flag.FlagSet, action string, stdout io.Writer) func(*ctlClient) error {
	var r control.Request
	r.Action = action
	fs.StringVar(&r.Policy, "policy", "", "the policy (or plan set) the entry is for")
	fs.StringVar(&r.Source, "source", "", "ip, cidr or a key source such as header:X-API-Key (default: the policy's own key)")
	fs.StringVar(&r.Key, "key", "", "the client's raw value: an address, a prefix, a credential")
	fs.StringVar(&r.ExpiresIn, "for", "", "how long the entry lasts, e.g. 1h (default: until deleted)")
	fs.StringVar(&r.Reason, "reason", "", "why, for the audit log and the admin page")
	var limit, burst int64 = -1, -1
	if action == "override" {
		fs.Int64Var(&limit, "limit", -1, "the override's limit (window algorithms, concurrency)")
		fs.StringVar(&r.Window, "window", "", "the override's window, e.g. 1m")
		fs.StringVar(&r.Rate, "rate", "", "the override's rate, e.g. 5r/s (bucket algorithms)")
		fs.Int64Var(&burst, "burst", -1, "the override's burst (bucket algorithms)")
		fs.StringVar(&r.Plan, "plan", "", "the plan the client gets (a plan set)")
	}
	return func(c *ctlClient) error {
		if limit >= 0 {
			r.Limit = &limit
		}
		if burst >= 0 {
			r.Burst = &burst
		}
		var e control.Entry
		if err := c.do(http.MethodPost, "/api/entries", &r, &e); err != nil {
			return err
		}
		exp := "never expires"
		if e.Expires != nil {
			exp = "expires " + e.Expires.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%s %s: %s of %s on policy %s, %s\n", action, e.ID, e.Action, e.Client, e.Policy, exp)
		return nil
	}
}
