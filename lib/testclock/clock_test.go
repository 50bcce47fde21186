//go:build !crdtestclock

package testclock

import (
	"testing"
	"time"
)

// A released build reads the real clock, whatever the environment says.
func TestNowIsTheRealClock(t *testing.T) {
	t.Setenv("CRD_TEST_CLOCK_OFFSET", "5h")
	if Enabled {
		t.Fatal("Enabled is true without the crdtestclock build tag")
	}
	before := time.Now()
	got := Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("Now() = %s, want between %s and %s (the real clock)", got, before, after)
	}
}
