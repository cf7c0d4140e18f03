// Package nginxtest runs a real nginx in the foreground for tests, so
// rlproxy's behaviour can be compared with the reference implementation it
// imitates (limit_req, realip) rather than with a transcription of it.
//
// The binary is "nginx" from PATH, else /usr/sbin/nginx (Debian's
// nginx-light has limit_req, realip and proxy). When neither exists the
// test is skipped, unless the environment sets RLPROXY_REQUIRE_NGINX=1 (CI),
// where it fails.
package nginxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlproxy/internal/testutil/netutil"
)

// startTimeout bounds how long nginx may take to accept connections.
const startTimeout = 10 * time.Second

// Listen is the placeholder that Start replaces, in the http{} body, with
// the free loopback address it chose ("127.0.0.1:PORT"), e.g.
// `server { listen {{listen}}; ... }`.
const Listen = "{{listen}}"

// Dir is the placeholder that Start replaces with the server's private
// directory (for extra files a configuration may want to name).
const Dir = "{{dir}}"

// Server is one nginx process owned by a test.
type Server struct {
	// Addr is the "127.0.0.1:PORT" that replaced {{listen}}.
	Addr string
	// URL is "http://" + Addr.
	URL string
	// Dir is the prefix directory: configuration, pid, logs and temp paths.
	Dir string

	proc *netutil.Process
}

// Binary returns the nginx executable's path, or "" when none is installed.
func Binary() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if st, err := os.Stat("/usr/sbin/nginx"); err == nil && !st.IsDir() {
		return "/usr/sbin/nginx"
	}
	return ""
}

// Start writes a configuration around httpBody (the inside of http{}, with
// {{listen}} and {{dir}} placeholders), runs nginx in the foreground as a
// single process (daemon off, master_process off, one worker loop), waits
// until it accepts connections on {{listen}} and stops it at cleanup.
// Logs, the pid file and every temp path live in a private directory; the
// error log is shown when the test fails or nginx does not start.
func Start(t testing.TB, httpBody string) *Server {
	t.Helper()
	return start(t, httpBody, func() string { return netutil.FreeAddr(t) })
}

// maxStartAttempts bounds the ports start tries when each is taken before
// nginx binds it.
const maxStartAttempts = 5

// start is Start with the choice of address injected. A free port can be
// taken by another process (a parallel test, a package run alongside)
// before nginx binds it: that start is retried on a new address, as
// redisserver does; any other failure is not.
func start(t testing.TB, httpBody string, pickAddr func() string) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("RLPROXY_REQUIRE_NGINX") == "1" {
			t.Fatal("nginx not found in PATH nor at /usr/sbin/nginx and RLPROXY_REQUIRE_NGINX=1")
		}
		t.Skip("skipping: nginx not installed (apt-get install nginx-light, or set RLPROXY_REQUIRE_NGINX=1 to fail instead)")
	}
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		s, conf, log, exited := launch(t, bin, dir, pickAddr(), httpBody)
		if !exited {
			return s
		}
		if attempt == maxStartAttempts || !strings.Contains(log, "Address already in use") {
			t.Fatalf("nginx exited during start:\n%s\nconfiguration:\n%s", log, conf)
		}
	}
}

// launch runs nginx on addr and waits until it accepts connections. If it
// exits first, launch returns its output and error log with exited true;
// any other failure fails the test.
func launch(t testing.TB, bin, dir, addr, httpBody string) (s *Server, conf, log string, exited bool) {
	t.Helper()
	body := strings.NewReplacer(Listen, addr, Dir, dir).Replace(httpBody)
	conf = fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, body)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatalf("writing nginx.conf: %v", err)
	}
	// A failed attempt's error log would be read as this one's.
	_ = os.Remove(filepath.Join(dir, "error.log"))
	pidPath := filepath.Join(dir, "nginx.pid")
	_ = os.Remove(pidPath)
	s = &Server{Addr: addr, URL: "http://" + addr, Dir: dir}
	// -e: nginx opens its default error log before reading the
	// configuration; point it into dir so no system path is touched.
	cmd := exec.Command(bin, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", confPath,
		"-g", "daemon off; master_process off;")
	out := &netutil.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := netutil.Start(cmd) // a killed nginx's exit status is expected
	if err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	s.proc = proc
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// nginx writes its pid file only after binding its listeners, so a
	// connection accepted before that is another process's on a taken port.
	err = netutil.Poll(ctx, proc.Exited(), netutil.PollInterval, func() error {
		if _, err := os.Stat(pidPath); err != nil {
			return err
		}
		return netutil.Accepts(addr)
	})
	switch {
	case errors.Is(err, netutil.ErrExited):
		return nil, conf, out.String() + s.ErrorLog(), true
	case err != nil:
		s.Stop()
		t.Fatalf("nginx did not accept connections on %s within %v:\n%s", addr, startTimeout, s.ErrorLog())
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("nginx error log (%s):\n%s%s", s.Addr, out.String(), s.ErrorLog())
		}
	})
	return s, conf, "", false
}

// Stop kills nginx and waits for it to exit. It is safe to call twice.
func (s *Server) Stop() { s.proc.Kill() }

// ErrorLog returns the contents of nginx's error log so far ("" if none).
func (s *Server) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
	return string(b)
}
