package lock

import "time"

// Backoff is exponential backoff with full jitter between Min and Max: the
// n-th retry (from 0) waits a uniformly random time in
// [Min, min(Max, Min·2^(n+1))]. Rand returns a number in [0, 1) and is
// injected so tests are deterministic (math/rand/v2's Float64 in production).
type Backoff struct {
	Min, Max time.Duration
	Rand     func() float64
}

// Delay is the wait before retry number attempt (0 is the first retry).
func (b Backoff) Delay(attempt int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = time.Second
	}
	if hi < lo {
		hi = lo
	}
	ceiling := lo
	for i := 0; i <= attempt && ceiling < hi; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, hi)
	r := 0.5
	if b.Rand != nil {
		r = b.Rand()
	}
	return lo + time.Duration(r*float64(ceiling-lo))
}
