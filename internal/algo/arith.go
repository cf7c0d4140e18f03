package algo

import "math/bits"

// The shared integer arithmetic of the algorithms (docs/DESIGN.md
// "Decision arithmetic"); lua/prelude.lua of the Valkey store holds its
// twins (cdiv, muldiv).

// ceilDiv is ceil(a/b) for a ≥ 0, b > 0 (DESIGN: floor((a+b-1)/b)).
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// mulDiv is floor(a·b/d) and whether a·b is not a multiple of d, for a,
// b ≥ 0 and d > 0 with a ≤ d or b ≤ d (so the quotient fits in 64 bits):
// the 128-bit product of math/bits, so a count times a window in ms
// (10^12 · 3.2·10^10) is never formed in an int64. The Lua twin is
// prelude.lua's muldiv.
func mulDiv(a, b, d int64) (q int64, frac bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 { // the common case: a 64-bit division is cheaper
		return int64(lo / uint64(d)), lo%uint64(d) != 0
	}
	qq, r := bits.Div64(hi, lo, uint64(d))
	return int64(qq), r != 0
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
