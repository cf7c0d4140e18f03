package config

import (
	"os"
	"testing"
)

// BenchmarkParseLoginAPI measures one load of an example config (what a
// start or a reload costs the decoder).
func BenchmarkParseLoginAPI(b *testing.B) {
	b.Setenv("VALKEY_PASSWORD", "x")
	data, err := os.ReadFile("../../configs/login-api.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseWith("../../configs/login-api.yaml", data, LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
