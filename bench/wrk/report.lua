-- report.lua: wrk's done() hook printing the run's figures as one JSON line
-- prefixed "BENCHJSON " (latencies in microseconds), so the bench harness
-- reads exact percentiles instead of wrk's rounded text. No request()
-- function unless BENCH_KEYS is set: wrk stays on its static-request fast
-- path.
--
-- With BENCH_DELAY_MS=N in the environment each connection also waits N ms
-- after every response before sending the next request (wrk's delay() hook;
-- the wait is not part of the measured latency). That paces the load below
-- saturation, which wrk -c alone cannot do (wrk has no -R; wrk2 is not in
-- Debian).
--
-- With BENCH_KEYS=N each request carries the next of N X-API-Key values
-- ("client-1" ... "client-N", in turn): N clients for a policy keyed by that
-- header. The requests are formatted once, in init, so request() only picks
-- one.
local nkeys = tonumber(os.getenv("BENCH_KEYS") or "")
if nkeys and nkeys > 0 then
  local reqs, i = {}, 0
  init = function()
    for k = 1, nkeys do
      reqs[k] = wrk.format(nil, nil, { ["X-API-Key"] = "client-" .. k })
    end
  end
  request = function()
    i = i % nkeys + 1
    return reqs[i]
  end
end
local pace = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if pace and pace > 0 then
  delay = function() return pace end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,' ..
    '"p50_us":%.1f,"p90_us":%.1f,"p99_us":%.1f,"max_us":%.1f,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
