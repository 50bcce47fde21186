// Package buildtest builds the product's commands inside a test the way
// `make build` does (CGO_ENABLED=0, -trimpath, -buildvcs=false, -s -w, Go's
// defaults otherwise), for tests that check what a released binary contains
// or does at start-up.
package buildtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Module is the import path prefix of the commands.
const Module = "github.com/clusterrebootd/clusterrebootd/cmd/"

// Build builds cmd/<command> into dir/<name> (with the build tags, if any)
// and returns its path. It fails the test when the build fails.
func Build(t testing.TB, dir, name, command string, tags ...string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", tags[0])
	}
	cmd := exec.Command("go", append(args, Module+command)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}
	return out
}
