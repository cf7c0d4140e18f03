package policy

import (
	"crypto/sha256"
	"encoding/base64"

	"rlproxy/internal/algo"
)

// partitionKey is RateLimit's pk parameter (IETF httpapi
// ratelimit-headers draft-11, "Partition Key"): an sf Byte Sequence
// (RFC 8941 §3.3.5) of the first 16 bytes of HMAC-SHA256 (RFC 2104),
// keyed by store.key_hash_secret, of the policy's state key for the
// client — the same client gets the same pk, and neither its address nor
// its credential can be read from it. It is computed per response with
// sha256.Sum256 on stack buffers, so it allocates nothing.
type partitionKey struct {
	ipad, opad [sha256.BlockSize]byte
}

func newPartitionKey(secret []byte) *partitionKey {
	if len(secret) > sha256.BlockSize {
		s := sha256.Sum256(secret)
		secret = s[:]
	}
	pk := &partitionKey{}
	copy(pk.ipad[:], secret)
	copy(pk.opad[:], secret)
	for i := range pk.ipad {
		pk.ipad[i] ^= 0x36
		pk.opad[i] ^= 0x5c
	}
	return pk
}

// appendTo appends ":<base64>:" for key to b.
func (pk *partitionKey) appendTo(b []byte, key string) []byte {
	var buf [sha256.BlockSize + 256]byte
	inner := sha256.Sum256(append(append(buf[:0], pk.ipad[:]...), key...))
	outer := sha256.Sum256(append(append(buf[:0], pk.opad[:]...), inner[:]...))
	b = append(b, ':')
	b = base64.StdEncoding.AppendEncode(b, outer[:16])
	return append(b, ':')
}

// AppendPartitionKey appends item i's pk value to b, or returns b
// unchanged when response.partition_key is off or the item has no key
// (exempt).
func (res *Result) AppendPartitionKey(b []byte, i int) []byte {
	pk := res.Items[i].Policy.pk
	if pk == nil {
		return b
	}
	if k := res.KeyFor(i); k != "" {
		b = append(b, ";pk="...)
		b = pk.appendTo(b, k)
	}
	return b
}

// QuotaUnit is the draft-11 qu parameter of RateLimit-Policy for p, ""
// for the default ("requests"): "concurrent-requests" for a concurrency
// policy, whose quota is requests in flight.
func (p *Policy) QuotaUnit() string {
	if p.Limit.Kind == algo.Concurrency {
		return `"concurrent-requests"`
	}
	return ""
}

// ViolatedPolicies appends to b the names of the policies that refused
// the request (draft-11's problem member violated-policies), in item
// order.
func (res *Result) ViolatedPolicies(b []string) []string {
	for i := range res.Items {
		if it := &res.Items[i]; it.Status == Rejected {
			b = append(b, it.Policy.Name)
		}
	}
	return b
}
