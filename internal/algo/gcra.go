package algo

// gcra is the token bucket (token_bucket.go) under the name operators of
// redis-cell and throttled know it by: the generic cell rate algorithm
// (ITU-T I.371) with a burst tolerance is a token bucket whose capacity is
// the burst. Same fields, state and decisions; its own key code, so a
// policy switched between the two starts from idle state.
var gcra = Algorithm{
	Kind: GCRA, Name: "gcra", Label: "GCRA", Code: "gc", Listed: 7,
	Fields: []string{"rate", "burst"}, Required: []string{"rate", "burst"},
	MaxCount: MaxCount, MinBurst: 1, Bucket: true,
	params: tokenParams,
}
