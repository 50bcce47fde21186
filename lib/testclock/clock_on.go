//go:build crdtestclock

package testclock

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Enabled reports whether this binary was built with the crdtestclock tag
// (its wall clock can be skewed): true in this build.
const Enabled = true

// EnvOffset names the environment variable holding the skew, a Go duration.
const EnvOffset = "CRD_TEST_CLOCK_OFFSET"

// offset is read once per process; a sync.OnceValue is never written after
// initialisation, so it holds no mutable state of its own.
var offset = sync.OnceValue(func() time.Duration { return offsetFrom(os.Getenv, os.Stderr) })

// Now returns the real wall clock plus the offset of CRD_TEST_CLOCK_OFFSET.
// The monotonic reading moves by the same offset, so differences between
// two readings of Now are exact.
func Now() time.Time { return time.Now().Add(offset()) }

// Offset returns the offset Now adds.
func Offset() time.Duration { return offset() }

// offsetFrom parses EnvOffset from getenv; an invalid value is no offset,
// said in one line on stderr.
func offsetFrom(getenv func(string) string, stderr io.Writer) time.Duration {
	d, err := ParseOffset(getenv(EnvOffset))
	if err != nil {
		fmt.Fprintf(stderr, "testclock: %v; using the real clock\n", err)
		return 0
	}
	return d
}

// ParseOffset parses the value of CRD_TEST_CLOCK_OFFSET: "" is no offset,
// anything else a Go duration ("5h", "-7h30m", "90m").
func ParseOffset(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a Go duration (write e.g. 5h or -7h30m)", EnvOffset, s)
	}
	return d, nil
}
