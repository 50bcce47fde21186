//go:build !crdtestclock

package testclock

import "time"

// Enabled reports whether this binary was built with the crdtestclock tag
// (its wall clock can be skewed); false in a released binary.
const Enabled = false

// Now returns the wall clock: time.Now in a released binary.
func Now() time.Time { return time.Now() }
