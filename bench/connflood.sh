#!/usr/bin/env bash
# TestOneClientCannotFillListener (internal/e2e/connflood_test.go) with its
# figures kept: CLIENTS connections (default 10,000) from one address, idle
# or in keep-alive after one request, against a real rlproxy process with an
# open-file limit of 20,000 (derived caps), with the per-client cap derived
# and off; then 250 fresh probe connections from another address. Prints
# the connections open, refused and reclaimed, the probe connections'
# p50/p99, rlproxy's peak descriptors, goroutines and RSS.
# RLPROXY_TEST_ENGINE=std runs it on net/http (default auto). The log goes
# to bench/results/connflood-DATE-ENGINE.txt.
#
#   bench/connflood.sh
#   CLIENTS=2000 RLPROXY_TEST_ENGINE=std bench/connflood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-10000}
engine=${RLPROXY_TEST_ENGINE:-auto}
# The test process holds every flood socket and the upstream's side of
# rlproxy's upstream connections.
ulimit -Hn "$((2 * CLIENTS + 2000))" 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)"
mkdir -p bench/results
out="bench/results/connflood-$(date -u +%Y-%m-%d)-$engine.txt"
echo "engine $engine, $CLIENTS clients, load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
RLPROXY_CONNFLOOD_CLIENTS=$CLIENTS RLPROXY_TEST_ENGINE=$engine \
	go test -count=1 -timeout 15m -run '^TestOneClientCannotFillListener$' -v ./internal/e2e/ 2>&1 | grep -v 'rlproxytest.go' | tee -a "$out"
