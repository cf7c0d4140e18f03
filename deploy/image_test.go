package deploy_test

// The container image built without a container engine: scripts/image.sh
// assembles an OCI image layout with umoci, and skopeo (what pushes it to a
// registry) reads it.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOCIImage builds the image layout, inspects it with skopeo, unpacks
// it and runs its entrypoint with `version`: the static binary, stamped
// with the chart's appVersion, runs on an empty file system.
func TestOCIImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and an image")
	}
	umoci := needTool(t, "umoci", "apt-get install umoci")
	skopeo := needTool(t, "skopeo", "apt-get install skopeo")
	dir := filepath.Join(t.TempDir(), "oci")
	out, err := exec.Command("../scripts/image.sh", dir, "0.3.0").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	ref := "oci:" + dir + ":0.3.0"
	js, err := exec.Command(skopeo, "inspect", "--config", ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect --config %s: %v", ref, err)
	}
	var img struct {
		OS     string `json:"os"`
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
		} `json:"config"`
	}
	if err := json.Unmarshal(js, &img); err != nil {
		t.Fatal(err)
	}
	c := img.Config
	if img.OS != "linux" || c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/rlproxy"}) ||
		!slices.Equal(c.Cmd, []string{"-config", "/etc/rlproxy/rlproxy.yaml", "-listen", ":8080", "-admin-listen", ":9090"}) {
		t.Errorf("image config %+v: want linux, user 65532, ENTRYPOINT /rlproxy and the Dockerfile's CMD", img)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	if out, err := exec.Command(umoci, "unpack", "--rootless", "--image", dir+":0.3.0", bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
	// Without the CA bundle an https:// upstream fails with "certificate
	// signed by unknown authority".
	if fi, err := os.Stat(filepath.Join(bundle, "rootfs/etc/ssl/certs/ca-certificates.crt")); err != nil || fi.Size() == 0 {
		t.Errorf("the image's CA bundle: %v", err)
	}
	v, err := exec.Command(filepath.Join(bundle, "rootfs", c.Entrypoint[0]), "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "rlproxy 0.3.0 ") {
		t.Errorf("the entrypoint's version: %q (%v), want rlproxy 0.3.0 ...", v, err)
	}
	// A volume mounted on the state directory takes its owner from the
	// image: the user the image runs as, or tls.acme cannot write there.
	h := layerEntry(t, dir, "var/lib/rlproxy/")
	if h == nil || h.Uid != 65532 || h.Gid != 65532 || h.Mode&0o777 != 0o700 {
		t.Errorf("the image's /var/lib/rlproxy: %+v, want a directory of 65532:65532, mode 0700", h)
	}
}

// layerEntry returns the tar header of name in the layers of the OCI
// layout dir's only image (the last layer that has it), or nil.
func layerEntry(t *testing.T, dir, name string) *tar.Header {
	t.Helper()
	blob := func(digest string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "blobs", strings.Replace(digest, ":", "/", 1)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var index, manifest struct {
		Manifests, Layers []struct{ Digest string }
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || json.Unmarshal(b, &index) != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %s", err, b)
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var found *tar.Header
	for _, l := range manifest.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(l.Digest)))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimPrefix(h.Name, "./") == name {
				found = h
			}
		}
	}
	return found
}
