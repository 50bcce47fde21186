// Package testclock is the wall clock of the daemon's cycle and of its
// `crd-lock step` child, and the one way to skew it in an end-to-end test.
//
// A released binary reads the real clock: Now is time.Now, Enabled is
// false, and nothing of the skew is compiled in (not even the name of its
// environment variable). A binary built with the build tag crdtestclock
// (`go build -tags crdtestclock`, `make e2e` builds them into
// .tools/bin-testclock) adds the Go duration in the environment variable
// CRD_TEST_CLOCK_OFFSET ("5h", "-7h30m") to every reading of Now, as a
// machine whose wall clock is that far off would see it. The variable is
// read once, at the first reading; an empty or unset variable is no offset,
// and an invalid one is no offset too, said in one line on stderr (the real
// clock is the safe answer: a test that meant to skew then sees no skew and
// fails on its own assertions rather than on a clock that jumps).
//
// Only wall-clock readings go through Now: window evaluation, day
// boundaries, timestamps written. Durations, timers and lease keepalives
// use the monotonic clock, which a skewed wall clock does not affect. Such
// a build says so in `clusterrebootd version` (a "+testclock" version suffix
// and "test_clock": true) and in the version of the health record it
// publishes. This package reads the environment, which libraries here
// otherwise never do: only the test build does, and docs/e2e.md
// ("Clock skew") explains why the skew cannot live in a released binary.
package testclock
