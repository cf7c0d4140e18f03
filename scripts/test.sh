#!/usr/bin/env bash
# The README's test command: installs what the tests need (Debian packages),
# then checks formatting, vets, runs every test with the race detector, runs
# the fuzzers for a bounded number of executions and the benchmarks once (so they cannot rot).
#
#   ./scripts/test.sh            everything (CI: .ci/run)
#   ./scripts/test.sh -short     the quick mode: installs nothing, checks formatting, vets and
#                                runs the main module's tests with the race detector (tests whose
#                                server or tool is missing skip) and the schema module; not the
#                                deploy and bench modules, the fuzzers nor the benchmarks. Its
#                                instances serve HTTP/1.x with server.engine auto only; the full
#                                run repeats the end-to-end and server packages on std
#                                (RLPROXY_TEST_ENGINE, package rlproxytest)
#   FUZZTIME=1000000x ./scripts/test.sh   fuzz longer (a count of executions)
set -euo pipefail
cd "$(dirname "$0")/.."

short=0
case "${1:-}" in
  "") ;;
  -short) short=1 ;;
  *) echo "usage: $0 [-short]" >&2; exit 2 ;;
esac

# static_checks: formatting; comments that cite no tracker item (a reader of
# the repository cannot open one: cite a file or a standard) and name only
# identifiers, files and headings the repository has; vet.
static_checks() {
  echo "== gofmt"
  local bad
  bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  if [ -n "$bad" ]; then echo "gofmt would change: $bad" >&2; exit 1; fi
  echo "== comments name no tracker item"
  if git grep -nE 'issue [0-9]|issue: ' -- '*.go'; then
    echo "the comments above name tracker items: cite the repository or a standard" >&2; exit 1
  fi
  echo "== comments name only what the repository has (scripts/commentcheck)"
  go run ./scripts/commentcheck
  echo "== go vet"
  go vet ./...
}

if ((short)); then
  start=$SECONDS
  export PATH=$PATH:$(go env GOPATH)/bin
  static_checks
  echo "== go test -race -short"
  go test -race -short -p 1 -count=1 -timeout 15m ./...
  echo "== go vet, go test -race (internal/config/schematest)"
  (cd internal/config/schematest && go vet ./... && go test -race -count=1 ./...)
  echo "== quick tests passed in $((SECONDS - start)) s (the full run: ./scripts/test.sh)"
  exit 0
fi

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v nginx >/dev/null || need+=(nginx-light)
command -v caddy >/dev/null || need+=(caddy)
command -v promtool >/dev/null || need+=(prometheus)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v chromium >/dev/null || need+=(chromium)
command -v jq >/dev/null || need+=(jq)
command -v haproxy >/dev/null || need+=(haproxy)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v curl >/dev/null || need+=(curl)
command -v umoci >/dev/null || need+=(umoci)
command -v skopeo >/dev/null || need+=(skopeo)
command -v wrk >/dev/null || need+=(wrk)
command -v pebble >/dev/null || need+=(pebble) # ACME tests (internal/acme, internal/server)
[ -s /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
fi
# goreleaser (deploy/: `goreleaser check`), from the Go module proxy.
export PATH=$PATH:$(go env GOPATH)/bin
if ! command -v goreleaser >/dev/null; then
  echo "== installing goreleaser (go install, a few minutes the first time)"
  GOFLAGS= go install github.com/goreleaser/goreleaser/v2@v2.15.1
fi
# grpcurl (internal/envoyrls: the RLS through server reflection), likewise.
if ! command -v grpcurl >/dev/null; then
  echo "== installing grpcurl (go install)"
  GOFLAGS= go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
fi
# helm (deploy/: `helm lint`, `helm template`), the version deploy/go.mod links.
if ! command -v helm >/dev/null; then
  echo "== installing helm (go install, about 2 minutes the first time)"
  GOFLAGS= go install helm.sh/helm/v3/cmd/helm@v3.22.0
fi
# Tests that need these tools fail instead of skipping when this is set.
export RLPROXY_REQUIRE_REDIS=1 RLPROXY_REQUIRE_TOOLS=1 RLPROXY_REQUIRE_NGINX=1

static_checks
echo "== go test -race"
# -p 1: packages run one at a time; several start real servers and some
# measure real time (kept >= 100 ms from decision boundaries).
go test -race -p 1 -count=1 -timeout 15m ./...
# The same instances on the other engine (server.engine: std): every
# feature works on both (docs/reference/config.md, "Engines").
echo "== go test -race, server.engine std (internal/e2e, internal/server)"
RLPROXY_TEST_ENGINE=std go test -race -p 1 -count=1 -timeout 15m ./internal/e2e ./internal/server
# Modules of their own (their test dependencies stay out of the product's go.mod).
for mod in bench bench/ceiling deploy internal/config/schematest; do
  echo "== go vet, go test -race ($mod)"
  (cd "$mod" && go vet ./... && go test -race -count=1 ./...)
done
# A count, not a duration: with a duration, Go's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" (no input found) when a
# starved worker is still mid-call at the deadline. A count has no deadline.
# 200,000 executions take 10-20 s each here. Minimizing an input is capped so
# a slow minimization cannot stretch the run.
echo "== fuzz (${FUZZTIME:=200000x} each)"
for target in FuzzClientIP:./internal/realip FuzzKey:./internal/clientkey FuzzSendable:./internal/upstream \
  FuzzPath:./internal/reqview FuzzRequestHead:./internal/h1 FuzzChunkedBody:./internal/h1 FuzzResponseHead:./internal/h1; do
  go test -run '^$' -fuzz "^${target%%:*}\$" -fuzztime "$FUZZTIME" \
    -fuzzminimizetime 10s "${target#*:}"
done
echo "== benchmarks (100 iterations each: they must run, figures are not judged here)"
go test -run '^$' -bench . -benchtime 100x ./... >/dev/null
(cd bench && go test -run '^$' -bench . -benchtime 100x ./... >/dev/null)
echo "== all tests passed"
