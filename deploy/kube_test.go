package deploy_test

// The Kubernetes kit: the kustomize base, its overlay and component, and the
// Helm chart rendered with default and non-default values. Every object
// decodes strictly (an unknown field fails) into the Go types the API server
// itself uses (k8s.io/api, prometheus-operator's for the ServiceMonitor), and
// carries what docs/reference/deployment.md promises: probes on the admin port, a non-root
// read-only container, the config mounted as a directory so edits reload,
// a grace period longer than the shutdown sequence.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"rlproxy/internal/config"
	"rlproxy/internal/testutil/netutil"
	"rlproxy/internal/testutil/redisserver"
	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// objects is one rendering: every object decoded into its API type.
type objects struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
}

// decodeAll splits a multi-document YAML stream and decodes each document
// strictly by its kind; an unknown kind or field fails the test.
func decodeAll(t *testing.T, name string, stream []byte) *objects {
	t.Helper()
	var o objects
	for i, doc := range bytes.Split(stream, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 || isComments(doc) {
			continue
		}
		// The line break the split took back: a block scalar at the end
		// of a document keeps its last newline.
		js, err := sigsyaml.YAMLToJSON(append(doc, '\n'))
		if err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		var meta struct{ Kind string }
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		var dst any
		switch meta.Kind {
		case "Deployment":
			d := new(appsv1.Deployment)
			o.deployments, dst = append(o.deployments, d), d
		case "Service":
			s := new(corev1.Service)
			o.services, dst = append(o.services, s), s
		case "ConfigMap":
			c := new(corev1.ConfigMap)
			o.configMaps, dst = append(o.configMaps, c), c
		case "Secret":
			s := new(corev1.Secret)
			o.secrets, dst = append(o.secrets, s), s
		case "PodDisruptionBudget":
			p := new(policyv1.PodDisruptionBudget)
			o.pdbs, dst = append(o.pdbs, p), p
		case "ServiceMonitor":
			s := new(monitoringv1.ServiceMonitor)
			o.serviceMonitors, dst = append(o.serviceMonitors, s), s
		default:
			t.Fatalf("%s: document %d: unexpected kind %q", name, i, meta.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			t.Fatalf("%s: %s (document %d): %v", name, meta.Kind, i, err)
		}
	}
	return &o
}

func isComments(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKustomize builds the base and the demo overlay (with the
// ServiceMonitor component) and checks every object.
func TestKustomize(t *testing.T) {
	base := decodeAll(t, "base", kustomize(t, "kubernetes/base"))
	if len(base.deployments) != 1 || len(base.services) != 2 || len(base.configMaps) != 1 || len(base.pdbs) != 1 || len(base.serviceMonitors) != 0 {
		t.Fatalf("base: %d deployments, %d services, %d configmaps, %d pdbs, %d servicemonitors; want 1 2 1 1 0",
			len(base.deployments), len(base.services), len(base.configMaps), len(base.pdbs), len(base.serviceMonitors))
	}
	checkRlproxy(t, "base", base, base.deployments[0], 2)
	demo := decodeAll(t, "demo", kustomize(t, "kubernetes/overlays/demo"))
	// No ServiceMonitor: the demo must apply on a cluster without the
	// prometheus-operator's CRDs.
	if len(demo.deployments) != 2 || len(demo.secrets) != 1 || len(demo.serviceMonitors) != 0 {
		t.Fatalf("demo: %d deployments (rlproxy + valkey), %d secrets, %d servicemonitors; want 2 1 0", len(demo.deployments), len(demo.secrets), len(demo.serviceMonitors))
	}
	checkRlproxy(t, "demo", demo, demo.deployments[0], 2)
	checkSecretKeys(t, demo.secrets[0], demo.deployments[0])
}

// helmCase is one set of chart values and what its rendering must hold.
type helmCase struct {
	name     string
	values   map[string]any
	replicas int32
	monitors int
	// secretEnv lists the variables set from Secrets, as "NAME=secret/key".
	secretEnv []string
}

// documentedImage is the image the chart's values.yaml and
// docs/reference/deployment.md name as the default.
const documentedImage = "ghcr.io/rlproxy/rlproxy:0.3.0"

// productionConfig is the README's production example, which its Helm
// command passes with --set-file config=configs/production.yaml.
const productionConfig = "../configs/production.yaml"

// helmCases are the chart's defaults (the demo config: no secrets), a
// non-default set, the README's production values (a config as a string,
// whose *_env variables come from the Secret "rlproxy"), and a map config
// (never merged with the demo's).
func helmCases(t *testing.T) []helmCase {
	prod, err := os.ReadFile(productionConfig)
	if err != nil {
		t.Fatal(err)
	}
	return []helmCase{
		{"defaults", nil, 2, 0, nil},
		{"custom", map[string]any{
			"replicaCount":   3,
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
			"extraEnv":       []any{map[string]any{"name": "GOMAXPROCS", "value": "2"}},
			"image":          map[string]any{"tag": "0.3.1"},
			"acme":           map[string]any{"httpPort": 8081},
			"service":        map[string]any{"port": 443},
			"adminTokens":    map[string]any{"secretName": "rl-admin-tokens"},
		}, 3, 1, nil},
		{"production", map[string]any{"config": string(prod), "secret": map[string]any{"name": "rlproxy"}}, 2, 0,
			[]string{"RLPROXY_KEY_HASH_SECRET=rlproxy/RLPROXY_KEY_HASH_SECRET", "VALKEY_PASSWORD=rlproxy/VALKEY_PASSWORD"}},
		{"map config", map[string]any{
			"config": map[string]any{
				"store":     map[string]any{"type": "memory"},
				"upstreams": map[string]any{"app": map[string]any{"url": "http://app:3000"}},
				"routes":    []any{map[string]any{"name": "all", "upstream": "app"}},
				"admin":     map[string]any{"basic_auth": map[string]any{"user": "ops", "password_env": "ADMIN_PASSWORD"}},
			},
			"envSecrets": map[string]any{"ADMIN_PASSWORD": map[string]any{"name": "ops", "key": "pw"}},
		}, 2, 0, []string{"ADMIN_PASSWORD=ops/pw"}},
	}
}

// checkHelm asserts what a rendering of the chart with c.values must hold.
func checkHelm(t *testing.T, c helmCase, o *objects) {
	t.Helper()
	if len(o.deployments) != 1 || len(o.serviceMonitors) != c.monitors {
		t.Fatalf("%d deployments, %d servicemonitors; want 1, %d", len(o.deployments), len(o.serviceMonitors), c.monitors)
	}
	ct := o.deployments[0].Spec.Template.Spec.Containers[0]
	var secretEnv []string
	for _, e := range ct.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			secretEnv = append(secretEnv, e.Name+"="+r.SecretKeyRef.Name+"/"+r.SecretKeyRef.Key)
		}
	}
	if !slices.Equal(secretEnv, c.secretEnv) {
		t.Errorf("%s: env from Secrets %q, want %q (only what the config's *_env fields name)", c.name, secretEnv, c.secretEnv)
	}
	if c.name != "custom" && ct.Image != documentedImage {
		t.Errorf("%s: image %q, want the documented default %q", c.name, ct.Image, documentedImage)
	}
	if c.name == "production" {
		checkProduction(t, o)
	}
	checkRlproxy(t, c.name, o, o.deployments[0], c.replicas)
	if c.name == "custom" {
		if ct.Image != "ghcr.io/rlproxy/rlproxy:0.3.1" || !slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMAXPROCS" && e.Value == "2" }) {
			t.Errorf("custom values not applied: image %q env %+v", ct.Image, ct.Env)
		}
		if o.serviceMonitors[0].Labels["release"] != "prom" {
			t.Errorf("servicemonitor labels %v", o.serviceMonitors[0].Labels)
		}
		checkACMEPort(t, ct, o)
		checkAdminTokens(t, o.deployments[0].Spec.Template.Spec)
	}
}

// checkAdminTokens asserts adminTokens.secretName's rendering: the Secret
// mounted read-only at /etc/rlproxy-admin (admin.token_file's directory).
func checkAdminTokens(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool {
		return v.Name == "admin-tokens" && v.Secret != nil && v.Secret.SecretName == "rl-admin-tokens"
	}) {
		t.Errorf("adminTokens: no volume of Secret rl-admin-tokens: %+v", ps.Volumes)
	}
	if !slices.ContainsFunc(ps.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "admin-tokens" && m.MountPath == "/etc/rlproxy-admin" && m.ReadOnly
	}) {
		t.Errorf("adminTokens: not mounted read-only at /etc/rlproxy-admin: %+v", ps.Containers[0].VolumeMounts)
	}
}

// checkACMEPort asserts acme.httpPort's rendering: the container port of
// tls.acme.http_listen, and the public Service's port 80 to it beside the
// HTTPS port.
func checkACMEPort(t *testing.T, ct corev1.Container, o *objects) {
	t.Helper()
	if !slices.ContainsFunc(ct.Ports, func(p corev1.ContainerPort) bool { return p.Name == "acme-http" && p.ContainerPort == 8081 }) {
		t.Errorf("acme.httpPort: no container port acme-http 8081: %+v", ct.Ports)
	}
	for _, svc := range o.services {
		if svc.Labels["app.kubernetes.io/component"] == "admin" {
			continue
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d->%s", p.Name, p.Port, p.TargetPort.String()))
		}
		if want := []string{"http:443->http", "acme-http:80->acme-http"}; !slices.Equal(ports, want) {
			t.Errorf("public Service ports %v, want %v", ports, want)
		}
	}
}

// TestHelmChart renders the chart with its defaults and with non-default
// values through helm's Go library, and runs helm's own linter on it (as a
// library; TestHelmCLI runs the helm binary): warnings fail too.
func TestHelmChart(t *testing.T) {
	const dir = "helm/rlproxy"
	chart, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range helmCases(t) {
		t.Run(c.name, func(t *testing.T) {
			vals, err := chartutil.ToRenderValues(chart, c.values, chartutil.ReleaseOptions{Name: "edge", Namespace: "default", IsInstall: true}, chartutil.DefaultCapabilities)
			if err != nil {
				t.Fatal(err)
			}
			files, err := engine.Render(chart, vals)
			if err != nil {
				t.Fatal(err)
			}
			var stream bytes.Buffer
			names := make([]string, 0, len(files))
			for n := range files {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				if strings.HasSuffix(n, ".yaml") {
					fmt.Fprintf(&stream, "\n---\n%s", files[n])
				}
			}
			checkHelm(t, c, decodeAll(t, c.name, stream.Bytes()))
		})
	}
	res := lint.All(dir, nil, "default", false)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// checkRlproxy asserts what every rendering of the rlproxy Deployment must
// hold, and that its ConfigMap's configuration loads.
func checkRlproxy(t *testing.T, name string, o *objects, d *appsv1.Deployment, replicas int32) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Errorf("%s: replicas %v, want %d", name, d.Spec.Replicas, replicas)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		t.Fatalf("%s: deployment has no selector", name)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("%s: selector %s=%s does not select the pod template (%v)", name, k, v, d.Spec.Template.Labels)
		}
	}
	ps := d.Spec.Template.Spec
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(ps.Containers))
	}
	c := ps.Containers[0]
	for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[what]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s: %s probe %+v, want GET %s on port admin", name, what, p, want)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" && p.ContainerPort == 9090 }) {
		t.Errorf("%s: no admin port 9090: %+v", name, c.Ports)
	}
	sc, psc := c.SecurityContext, ps.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: want non-root, read-only root fs, no privilege escalation: %+v %+v", name, psc, sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: resource requests missing: %+v", name, c.Resources)
	}
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == "/etc/rlproxy" {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || mount.SubPath != "" {
		t.Fatalf("%s: the config must be mounted as the directory /etc/rlproxy (no subPath, or edits never reach the pod): %+v", name, c.VolumeMounts)
	}
	cm := configMapOf(t, name, o, ps, mount.Name)
	cfg := loadConfig(t, name, cm.Data["rlproxy.yaml"], c.Env)
	grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second
	if need := cfg.Server.ShutdownDelay + cfg.Server.ShutdownTimeout; grace <= need {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want more than shutdown_delay + shutdown_timeout = %v", name, grace, need)
	}
	checkAdminService(t, name, o)
	if len(o.pdbs) != 1 || o.pdbs[0].Spec.MinAvailable == nil || o.pdbs[0].Spec.MinAvailable.IntValue() < 1 {
		t.Errorf("%s: want one PodDisruptionBudget keeping a pod: %+v", name, o.pdbs)
	}
}

// checkProduction: the ConfigMap holds the README's production file byte
// for byte, and `rlproxy validate -allow-missing-env` accepts it where its
// secrets are not set (CI).
func checkProduction(t *testing.T, o *objects) {
	t.Helper()
	want, err := os.ReadFile(productionConfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.configMaps) != 1 || o.configMaps[0].Data["rlproxy.yaml"] != string(want) {
		t.Fatalf("production: the ConfigMap's rlproxy.yaml is not %s as it is", productionConfig)
	}
	p := filepath.Join(t.TempDir(), "rlproxy.yaml")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VALKEY_PASSWORD", "")
	t.Setenv("RLPROXY_KEY_HASH_SECRET", "")
	cfg, err := config.LoadWith(p, config.LoadOptions{AllowMissingEnv: true})
	if err != nil {
		t.Fatalf("production: validate -allow-missing-env refuses the rendered config:\n%v", err)
	}
	if len(cfg.Warnings) != 2 {
		t.Errorf("production: warnings %v, want the two unset variables", cfg.Warnings)
	}
}

// checkAdminService: the admin port is on a ClusterIP Service of its own,
// never on the Service that carries the proxy's port (which may be a
// LoadBalancer).
func checkAdminService(t *testing.T, name string, o *objects) {
	t.Helper()
	admin := 0
	for _, s := range o.services {
		if s.Labels["app.kubernetes.io/name"] != "rlproxy" {
			continue // the demo's Valkey
		}
		hasAdmin := slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "admin" })
		hasHTTP := slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "http" })
		switch {
		case hasAdmin && (hasHTTP || s.Spec.Type != corev1.ServiceTypeClusterIP):
			t.Errorf("%s: Service %s exposes the admin port beside http or as %s", name, s.Name, s.Spec.Type)
		case hasAdmin:
			admin++
		}
	}
	if admin != 1 {
		t.Errorf("%s: %d admin Services, want 1", name, admin)
	}
}

func configMapOf(t *testing.T, name string, o *objects, ps corev1.PodSpec, volume string) *corev1.ConfigMap {
	t.Helper()
	for _, v := range ps.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			for _, cm := range o.configMaps {
				if cm.Name == v.ConfigMap.Name {
					return cm
				}
			}
			t.Fatalf("%s: volume %s names ConfigMap %q, which the rendering lacks", name, volume, v.ConfigMap.Name)
		}
	}
	t.Fatalf("%s: no ConfigMap volume %q", name, volume)
	return nil
}

// loadConfig loads a ConfigMap's rlproxy.yaml the way the pod would: with
// every variable the container's env provides set (to stand-in values: the
// Secrets are not part of the test).
func loadConfig(t *testing.T, name, data string, env []corev1.EnvVar) *config.Config {
	t.Helper()
	for _, e := range env {
		t.Setenv(e.Name, "0123456789abcdef-stand-in")
	}
	p := filepath.Join(t.TempDir(), "rlproxy.yaml")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadWith(p, config.LoadOptions{})
	if err != nil {
		t.Fatalf("%s: the ConfigMap's rlproxy.yaml does not load:\n%v", name, err)
	}
	return cfg
}

// checkSecretKeys: every secretKeyRef of the Deployment names a key the
// overlay's Secret has.
func checkSecretKeys(t *testing.T, s *corev1.Secret, d *appsv1.Deployment) {
	t.Helper()
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			_, inData := s.Data[r.SecretKeyRef.Key]
			_, inString := s.StringData[r.SecretKeyRef.Key]
			if r.SecretKeyRef.Name != s.Name || !(inData || inString) {
				t.Errorf("env %s refers to secret %s key %s, which the demo does not provide", e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			}
		}
	}
}

// TestConfigMapReload mounts the kustomize base's own ConfigMap content the
// way the kubelet does (rlproxy.yaml → ..data/rlproxy.yaml, ..data →
// ..<generation>), serves it (its store pointed at a real redis-server, its
// listeners at free ports), then swaps ..data to a generation with a
// raised burst: the new limit applies without a signal or restart.
func TestConfigMapReload(t *testing.T) {
	o := decodeAll(t, "base", kustomize(t, "kubernetes/base"))
	data := o.configMaps[0].Data["rlproxy.yaml"]
	rs := redisserver.Start(t)
	rs.Do(t, "CONFIG", "SET", "requirepass", "0123456789abcdef-stand-in")
	for _, e := range o.deployments[0].Spec.Template.Spec.Containers[0].Env {
		t.Setenv(e.Name, "0123456789abcdef-stand-in")
	}
	listen, admin := netutil.FreeAddr(t), netutil.FreeAddr(t)
	render := func(burst string) string {
		s := data
		for from, to := range map[string]string{
			`listen: ":8080"`: `listen: "` + listen + `"`, `admin_listen: ":9090"`: `admin_listen: "` + admin + `"`,
			`"valkey:6379"`: `"` + rs.Addr + `"`, "burst: 5": "burst: " + burst,
		} {
			if strings.Count(s, from) != 1 {
				t.Fatalf("the ConfigMap's rlproxy.yaml has %q %d times, want once", from, strings.Count(s, from))
			}
			s = strings.Replace(s, from, to, 1)
		}
		return s
	}
	dir := t.TempDir()
	generation := func(name, burst string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "rlproxy.yaml"), []byte(render(burst)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	generation("..2026_12_01_1", "5")
	must(os.Symlink("..2026_12_01_1", filepath.Join(dir, "..data")))
	must(os.Symlink("..data/rlproxy.yaml", filepath.Join(dir, "rlproxy.yaml")))
	in := rlproxytest.Start(t, "", rlproxytest.FromFile(filepath.Join(dir, "rlproxy.yaml")))
	if c := get(t, in.URL+"/api/x", 6, 1); c[200] != 5 || c[429] != 1 {
		t.Fatalf("burst 5: statuses %v, want 5 × 200 and 1 × 429", c)
	}
	// The kubelet's update: a new generation, ..data renamed over, the old one removed.
	generation("..2026_12_01_2", "7")
	must(os.Symlink("..2026_12_01_2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_12_01_1")))
	// Refusals are not charged, so polling does not use the burst up.
	waitfor.True(t, "the raised burst applied (the swapped ConfigMap reloaded)", func() bool { return get(t, in.URL+"/api/x", 1, 1)[200] == 1 })
}
