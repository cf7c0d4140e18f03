#!/bin/sh
# Runs the Cluster failover test (a 3+3 Redis Cluster on loopback, one
# master SIGKILLed under load) RUNS times in a row (default 5): breakers
# and rlproxy_breaker_open follow the takeover, no decision of the dead
# master's keys fails once the new owner answered, and the shipped
# RlproxyBreakerOpen alert fires during the outage and resolves after.
# CI runs it once (scripts/test.sh); this is the repeated run.
set -eu
cd "$(dirname "$0")/.."
RLPROXY_FAILOVER_RUNS="${RUNS:-5}" exec go test -count=1 -timeout 30m -v -run '^TestClusterMasterKilled$' ./internal/e2e
