-- report.lua: wrk's done() hook printing the run's figures as one JSON line
-- prefixed "BENCHJSON " (latencies in microseconds), so the bench harness
-- reads exact percentiles instead of wrk's rounded text. Defining only done()
-- keeps wrk on its static-request fast path.
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
