// Package version reports what was built. The variables are set at link time
// with -ldflags -X (the one place a package-level variable is allowed: it is
// written by the linker, never at run time).
package version

import (
	"runtime"

	"github.com/clusterrebootd/clusterrebootd/lib/testclock"
)

// Set by the Makefile through -ldflags "-X ...".
var (
	Version   = "0.0.0-dev"
	Commit    = "unknown"
	BuildDate = "unknown"
)

// Info is the version as reported by `clusterrebootd version` and --version.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// TestClock is set in a build whose wall clock can be skewed for tests
	// (build tag crdtestclock, lib/testclock); such a build must never be
	// shipped. Its Version ends in "+testclock".
	TestClock bool `json:"test_clock,omitempty"`
}

// Get returns the build's version information.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, BuildDate: BuildDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if testclock.Enabled {
		i.Version += "+testclock"
		i.TestClock = true
	}
	return i
}

// Line is the one-line version of program that `clusterrebootd version
// --format text` and every tool's --version print:
// "crd-gate 1.2.0 (commit abc123, built 2026-01-01, go1.24.1, linux/amd64)".
func Line(program string) string {
	i := Get()
	return program + " " + i.Version + " (commit " + i.Commit + ", built " + i.BuildDate + ", " + i.GoVersion + ", " + i.Platform + ")"
}
