package deploy_test

// The Helm chart through the real helm binary (TestHelmChart uses helm's Go
// library): what an operator runs before installing it.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// helmInstall is how scripts/test.sh installs helm when missing: the
// version deploy/go.mod links, built from the Go module proxy.
const helmInstall = "GOFLAGS= go install helm.sh/helm/v3/cmd/helm@v3.22.0"

// TestHelmCLI runs `helm lint --strict` (warnings fail) and `helm template`
// on helm/rlproxy with the default and with non-default values (a -f
// file), and checks each rendering as TestHelmChart checks the library's.
func TestHelmCLI(t *testing.T) {
	bin := needTool(t, "helm", helmInstall)
	home := t.TempDir() // no user config, cache or repositories: offline and repeatable
	env := append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	t.Logf("helm version: %s", helm(t, bin, env, "version", "--short"))
	const chart = "helm/rlproxy"
	for _, c := range helmCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var values []string
			if c.values != nil {
				b, err := sigsyaml.Marshal(c.values)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				values = []string{"-f", f}
			}
			lint := helm(t, bin, env, append([]string{"lint", "--strict", chart}, values...)...)
			if !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(lint, "[WARNING]") || strings.Contains(lint, "[ERROR]") {
				t.Errorf("helm lint --strict:\n%s", lint)
			}
			out := helm(t, bin, env, append([]string{"template", "edge", chart, "--namespace", "default"}, values...)...)
			checkHelm(t, c, decodeAll(t, c.name, []byte("\n"+out)))
		})
	}
}

// helm runs the binary with args (in the deploy directory) and returns its
// combined output; a non-zero exit fails the test.
func helm(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
