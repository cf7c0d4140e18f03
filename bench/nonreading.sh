#!/usr/bin/env bash
# Stress form of TestNonReadingClients (internal/e2e/clientbounds_test.go):
# CLIENTS clients (default 10,000) ask for a 100 MB response and never
# read, against a real rlproxy process with an open-file limit of NOFILE
# (default 20,000; max_connections is left to its default, derived from
# it) and write_timeout 20s, while a keep-alive probe client sends a request
# every 20 ms. Prints how many were refused and cut, the probe's p50/p99,
# rlproxy's peak descriptors and RSS; fails if the probe saw a failure, a
# client was neither cut nor refused, an upstream connection stayed open,
# or rlproxy's descriptors reached its limit.
#
#   bench/nonreading.sh                  10,000 clients
#   CLIENTS=2000 bench/nonreading.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-10000}
NOFILE=${NOFILE:-20000}
# The test process holds every client socket and the upstream's side of
# each proxied connection (up to rlproxy's cap, about NOFILE / 2). Raise its
# limit where allowed; where not, lower rlproxy's so that both fit.
want=$((CLIENTS + NOFILE / 2 + 1000))
ulimit -Hn "$want" 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)"
if (($(ulimit -Hn) < want)); then
	NOFILE=$((2 * ($(ulimit -Hn) - CLIENTS - 1000) + 512))
	echo "note: the open-file limit is $(ulimit -Hn) and cannot be raised here: rlproxy runs with $NOFILE" >&2
fi
RLPROXY_NONREADING_CLIENTS=$CLIENTS RLPROXY_NONREADING_NOFILE=$NOFILE \
	go test -count=1 -timeout 10m -run '^TestNonReadingClients$' -v ./internal/e2e/ 2>&1 | grep -v 'rlproxytest.go'
