#!/usr/bin/env bash
# Stress form of TestSlowlorisClients (internal/e2e/slowloris_test.go):
# CLIENTS clients (default 10,000) over ten loopback addresses send a
# request head one byte a second and never finish it, against a real
# rlproxy process with an open-file limit of 20,000 and the defaults
# (read_header_timeout 10s, max_connections derived: 9,744), while a
# keep-alive probe client sends a request every 20 ms. Prints the
# connections refused and reclaimed, their lifetimes, the probe's p50/p99,
# rlproxy's peak descriptors, goroutines and RSS; fails if the probe saw a
# failure, a connection outlived 2 × read_header_timeout, or descriptors
# and goroutines did not come back. RLPROXY_TEST_ENGINE=std runs it on
# net/http (default auto). The log goes to
# bench/results/slowloris-DATE-ENGINE.txt.
#
#   bench/slowloris.sh
#   CLIENTS=2000 RLPROXY_TEST_ENGINE=std bench/slowloris.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-10000}
engine=${RLPROXY_TEST_ENGINE:-auto}
# The test process holds every client socket (and the upstream's side of
# the probe's connection).
ulimit -Hn "$((CLIENTS + 2000))" 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)"
mkdir -p bench/results
out="bench/results/slowloris-$(date -u +%Y-%m-%d)-$engine.txt"
echo "engine $engine, $CLIENTS clients, load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
RLPROXY_SLOWLORIS_CLIENTS=$CLIENTS RLPROXY_TEST_ENGINE=$engine \
	go test -count=1 -timeout 10m -run '^TestSlowlorisClients$' -v ./internal/e2e/ 2>&1 | grep -v 'rlproxytest.go' | tee -a "$out"
