package driver

import (
	"sync"
	"time"
)

// DefaultRepeatEvery is how often a repeated identical cycle message is
// logged again, with the count of the repetitions in between.
const DefaultRepeatEvery = 10 * time.Minute

// Limiter rate-limits repeated identical log messages so that a node blocked
// all weekend does not fill the journal: the first occurrence of a message is
// logged, repetitions are counted, and after Every a summary with the count
// is logged. A different message is always logged at once.
type Limiter struct {
	now   func() time.Time
	every time.Duration

	mu       sync.Mutex
	key      string
	lastEmit time.Time
	count    int
}

// NewLimiter returns a limiter on clock now (nil: time.Now); every <= 0 turns
// limiting off.
func NewLimiter(now func() time.Time, every time.Duration) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, every: every}
}

// Every is the summary period.
func (l *Limiter) Every() time.Duration { return l.every }

// Observe records one occurrence of key. It says whether to log it and, for
// a summary, how many occurrences were held back since the last one logged.
func (l *Limiter) Observe(key string) (emit bool, repeated int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.every <= 0 || key != l.key {
		l.key, l.lastEmit, l.count = key, now, 0
		return true, 0
	}
	l.count++
	if now.Sub(l.lastEmit) < l.every {
		return false, 0
	}
	n := l.count
	l.lastEmit, l.count = now, 0
	return true, n
}
