#!/usr/bin/env bash
# scripts/jaeger-trace.sh — rlproxy's traces in a real collector: builds
# Jaeger (tools/jaeger, a tools module of its own so the main module stays
# lean), runs it with OTLP/gRPC in and its in-memory store, runs rlproxy
# (Valkey store, tracing on) in front of bench/upstream, sends two requests
# and reads both traces back from Jaeger's query API:
#   1. a sampled traceparent from a trusted proxy: continued by rlproxy — its
#      server span's parent is the proxy's span, with the Valkey round trip
#      and the upstream attempt under it, decision attributes present;
#   2. the same client again, refused (429): its span names the policy, and
#      the problem+json requestId is its trace id.
# Exits 0 when both hold. Ports are free ones on 127.0.0.1; the first run
# builds Jaeger (several minutes). JAEGER_BIN=PATH uses a Jaeger binary
# already built from tools/jaeger instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq not found (apt-get install jq)" >&2; exit 1; }

bin=$root/bench/.bin
mkdir -p "$bin"
jaeger=${JAEGER_BIN:-$bin/jaeger}
if [[ -z ${JAEGER_BIN:-} ]]; then
	echo "building jaeger (tools/jaeger)" >&2
	(cd tools/jaeger && go build -o "$jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
fi
echo "building rlproxy, bench/upstream" >&2
go build -o "$bin/rlproxy-worktree" ./cmd/rlproxy
(cd bench && go build -o "$bin/upstream" ./upstream && go build -o "$bin/fixedload" ./cmd/fixedload)

dir=$(mktemp -d /tmp/jaeger-trace.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

port() { "$bin/fixedload" -free-port; }
otlp=$(port) query=$(port) qgrpc=$(port) health=$(port) up=$(port) vk=$(port) listen=$(port) admin=$(port)

cat >"$dir/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:$query
    grpc:
      endpoint: 127.0.0.1:$qgrpc
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:$health
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$otlp
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF

cat >"$dir/rlproxy.yaml" <<EOF
listen: "127.0.0.1:$listen"
admin_listen: "127.0.0.1:$admin"
store:
  type: valkey
  valkey: { addrs: ["127.0.0.1:$vk"] }
real_ip:
  trusted_proxies: [127.0.0.1]
upstreams:
  app: { url: "http://127.0.0.1:$up" }
policies:
  per-ip: { algorithm: token_bucket, rate: 1r/m, burst: 1, key: ip }
routes:
  - { name: api, match: { path_prefix: / }, upstream: app, policies: [per-ip] }
tracing:
  otlp_endpoint: "http://127.0.0.1:$otlp"
  service_name: rlproxy
  batch_timeout: 100ms
EOF

"$jaeger" --config "$dir/jaeger.yaml" >"$dir/jaeger.log" 2>&1 &
pids+=($!)
redis-server --port "$vk" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
pids+=($!)
"$bin/upstream" -listen "127.0.0.1:$up" >/dev/null 2>&1 &
pids+=($!)

# wait_for URL WHAT: until URL answers 200, at most 60 s.
wait_for() {
	for _ in $(seq 1 600); do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' "$1") == 200 ]]; then return 0; fi
		sleep 0.1
	done
	echo "$2 did not come up; its log:" >&2
	tail -n 20 "$dir/$2.log" >&2 || true
	exit 1
}
wait_for "http://127.0.0.1:$query/api/services" jaeger
"$bin/rlproxy-worktree" -config "$dir/rlproxy.yaml" >"$dir/rlproxy.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$admin/readyz" rlproxy

client_trace=0af7651916cd43dd8448eb211c80319c client_span=b7ad6b7169203331
s1=$(curl -s -o /dev/null -w '%{http_code}' -H "traceparent: 00-$client_trace-$client_span-01" "http://127.0.0.1:$listen/v1/items")
body=$(curl -s "http://127.0.0.1:$listen/v1/items")
refused=$(jq -r .requestId <<<"$body")
echo "request 1 (trusted traceparent, trace $client_trace): status $s1" >&2
echo "request 2 (refused, requestId $refused): $(jq -c '{status, policy}' <<<"$body")" >&2

# trace ID N: the trace from Jaeger's query API once it has N spans (60 s).
trace() {
	local out
	for _ in $(seq 1 600); do
		out=$(curl -s "http://127.0.0.1:$query/api/traces/$1")
		if [[ $(jq '[.data[0].spans[]?] | length' <<<"$out" 2>/dev/null) -ge $2 ]]; then
			echo "$out"
			return 0
		fi
		sleep 0.1
	done
	echo "trace $1: fewer than $2 spans in Jaeger after 60 s: $out" >&2
	exit 1
}

# show: one line per span of the trace on stdin.
show() {
	jq -r '.data[0] as $t | $t.spans | sort_by(.startTime)[] |
		"  \($t.processes[.processID].serviceName) \(.operationName) span=\(.spanID) parent=\((.references[]? | select(.refType == "CHILD_OF") | .spanID) // "-") " +
		([.tags[] | select(.key | test("^rlproxy\\.|^http\\.response\\.status_code$|^db\\.system")) | "\(.key)=\(.value)"] | join(" "))'
}

t1=$(trace "$client_trace" 3)
echo "Jaeger, trace $client_trace:" && show <<<"$t1"
t2=$(trace "$refused" 1)
echo "Jaeger, trace $refused:" && show <<<"$t2"

fail=0
# check NAME JQ TRACE: JQ (a boolean over the trace) must hold.
check() {
	if [[ $(jq "$2" <<<"$3") == true ]]; then echo "ok: $1"; else echo "FAILED: $1" >&2; fail=1; fi
}
srv='.data[0].spans[] | select(.operationName == "GET api")'
check "request 1's server span continues the proxy's span $client_span" \
	"[$srv | .references[] | select(.refType == \"CHILD_OF\") | .spanID] == [\"$client_span\"]" "$t1"
# (Jaeger shows a string list attribute as its JSON text: ["per-ip"].)
check "request 1 allowed, decided by per-ip, status 200" \
	"[$srv | .tags[] | select(.key == \"rlproxy.decision\" or .key == \"rlproxy.policies\" or .key == \"http.response.status_code\") | .value | tostring] | sort == [\"200\", \"[\\\"per-ip\\\"]\", \"allowed\"]" "$t1"
check "request 1's Valkey round trip and upstream attempt are children of its server span" \
	"([$srv | .spanID][0]) as \$s | [.data[0].spans[] | select(.operationName == \"valkey round trip\" or .operationName == \"GET\") | .references[0].spanID == \$s] == [true, true]" "$t1"
check "request 2 refused by per-ip (429)" \
	"[$srv | .tags[] | select(.key == \"rlproxy.decision\" or .key == \"rlproxy.policy\" or .key == \"http.response.status_code\") | .value | tostring] | sort == [\"429\", \"per-ip\", \"rejected\"]" "$t2"
echo "rlproxy trace metrics:"
curl -s "http://127.0.0.1:$admin/metrics" | grep '^rlproxy_trace_spans' | sed 's/^/  /'
exit $fail
