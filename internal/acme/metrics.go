package acme

import (
	"crypto/x509"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// expiryDesc is rlproxy_tls_certificate_expiry_timestamp_seconds: when the
// certificate served for a name expires (its NotAfter, Unix seconds), for
// an alert well before a renewal that keeps failing lets it lapse.
var expiryDesc = prometheus.NewDesc("rlproxy_tls_certificate_expiry_timestamp_seconds",
	"When the certificate served for name expires (NotAfter), Unix time in seconds: ACME's for its names, tls.cert_file's for the names in it.",
	[]string{"name"}, nil)

// expiryCollector reads the expiry times at each scrape: certmagic swaps
// a renewed certificate into its cache without telling anyone.
type expiryCollector struct{ m *Manager }

// Describe sends the one metric's description.
func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect sends, for each ACME name with a certificate in the cache, the
// latest expiry among its certificates, then the static certificate's
// expiry for each of its names ACME does not cover.
func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for _, name := range m.cfg.Domains {
		var latest *x509.Certificate
		for _, cert := range m.cache.AllMatchingCertificates(name) {
			if leaf := cert.Leaf; leaf != nil && (latest == nil || leaf.NotAfter.After(latest.NotAfter)) {
				latest = leaf
			}
		}
		if latest != nil {
			ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(latest.NotAfter.Unix()), name)
		}
	}
	leaf := leafOf(m.opts.Static())
	if leaf == nil {
		return
	}
	names := leaf.DNSNames
	if len(names) == 0 && leaf.Subject.CommonName != "" {
		names = []string{leaf.Subject.CommonName}
	}
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ToLower(n)
		if m.names[n] || seen[n] {
			continue
		}
		seen[n] = true
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()), n)
	}
}
