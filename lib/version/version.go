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
