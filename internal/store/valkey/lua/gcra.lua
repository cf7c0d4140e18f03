-- GCRA (algo's gcra.go): the token bucket under another name.
local gcra, refund_gcra, charge_gcra, quota_gcra =
  token_bucket, refund_token_bucket, charge_token_bucket, quota_token_bucket
