#!/usr/bin/env bash
# Stress form of TestConfigMemory (internal/e2e/configmem_test.go): a keys
# file of KEYS credentials (default 1,280,000: 54 MB) — peak RSS of
# `rlproxy validate` (bound: 4× the file over a config without it) and of
# a serving process — then the same credentials inline with an unknown
# plan (a 56 MB invalid config) swapped in under the serving process: the
# reload is refused with one log line under 64 KiB listing 100 problems and
# how many more, and RSS must come back within 50 MB of where it was.
#
#   bench/configmem.sh
#   KEYS=500000 bench/configmem.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RLPROXY_CONFIGMEM_KEYS=${KEYS:-1280000} \
	go test -count=1 -timeout 10m -run '^TestConfigMemory$' -v ./internal/e2e/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|configmem_test' | cut -c1-1000
