#!/usr/bin/env bash
# scripts/stress.sh — issue 21's stress test in full: 10,000 clients × 12
# requests against 10 per hour through 1 and 3 rlproxy instances on one
# redis-server, at 50, 200 and 500 connections, 5 runs each, a forced 60 ms
# server stall (DEBUG SLEEP 0.06) in each run, default valkey.timeout:
# 0 over-admitted clients and 0 fail-open decisions, p99.9 latency logged.
# The normal suite runs its short form (1,000 clients, 200 connections, one
# run). Override any dimension through the environment:
#   RLPROXY_STRESS_CLIENTS=10000 RLPROXY_STRESS_RUNS=5
#   RLPROXY_STRESS_INSTANCES=1,3 RLPROXY_STRESS_CONNS=50,200,500
#   RLPROXY_STRESS_TIMEOUT=...   (a valkey.timeout instead of the default)
#   RLPROXY_STRESS_STALL=1       (a longer stall, seconds: a measurement of the
#                                 headroom; fail-open decisions are logged, not judged)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH=$PATH:/usr/local/go/bin
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
export RLPROXY_STRESS_CLIENTS=${RLPROXY_STRESS_CLIENTS:-10000}
export RLPROXY_STRESS_RUNS=${RLPROXY_STRESS_RUNS:-5}
export RLPROXY_STRESS_INSTANCES=${RLPROXY_STRESS_INSTANCES:-1,3}
export RLPROXY_STRESS_CONNS=${RLPROXY_STRESS_CONNS:-50,200,500}
exec go test -count=1 -timeout 90m -run '^TestStressStall$' -v ./internal/e2e/
