package testclock_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/buildtest"
)

// A released binary must not contain the clock skew: not the code, not even
// the name of its environment variable. The binaries are built here the way
// `make build` builds them (with and without the tag, whichever tag this
// test itself was built with), so the check can fail.
func TestReleaseBuildHasNoTestClock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	dir := t.TempDir()
	const needle = "CRD_TEST_CLOCK_OFFSET"
	tests := []struct {
		name, bin string
		testClock bool
	}{
		{"clusterrebootd", buildtest.Build(t, dir, "clusterrebootd", "clusterrebootd"), false},
		{"crd-lock", buildtest.Build(t, dir, "crd-lock", "crd-lock"), false},
		{"clusterrebootd -tags crdtestclock", buildtest.Build(t, dir, "clusterrebootd-testclock", "clusterrebootd", "crdtestclock"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(tt.bin)
			if err != nil {
				t.Fatal(err)
			}
			if has := bytes.Contains(b, []byte(needle)); has != tt.testClock {
				t.Errorf("binary contains %s: %v, want %v", needle, has, tt.testClock)
			}
			if tt.name == "crd-lock" {
				return
			}
			out, err := exec.Command(tt.bin, "version", "--format", "json").Output()
			if err != nil {
				t.Fatalf("version: %v", err)
			}
			var v struct {
				Version   string `json:"version"`
				TestClock *bool  `json:"test_clock"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("version JSON %q: %v", out, err)
			}
			if got := v.TestClock != nil && *v.TestClock; got != tt.testClock {
				t.Errorf("version says test_clock %v, want %v: %s", got, tt.testClock, out)
			}
			if !tt.testClock && v.TestClock != nil {
				t.Errorf("a released build's version JSON has a test_clock field: %s", out)
			}
			if suffixed := bytes.HasSuffix([]byte(v.Version), []byte("+testclock")); suffixed != tt.testClock {
				t.Errorf("version %q ends in +testclock: %v, want %v", v.Version, suffixed, tt.testClock)
			}
		})
	}
}
