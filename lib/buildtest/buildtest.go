// Package buildtest builds the product's commands inside a test the way
// `make build` does (CGO_ENABLED=0, -trimpath, -buildvcs=false, -s -w, and
// the local tools' GOEXPERIMENT), for tests that check what a released binary
// contains or does at start-up.
package buildtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// Module is the import path prefix of the commands.
const Module = "github.com/clusterrebootd/clusterrebootd/cmd/"

// LocalTools are the commands the Makefile builds with GOEXPERIMENT=nogreenteagc
// (its LOCAL_TOOLS; TestMakefileAgrees keeps the two lists the same).
var LocalTools = []string{"crd-detect", "crd-window", "crd-gate", "crd-reboot"}

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
	if slices.Contains(LocalTools, command) {
		cmd.Env = append(cmd.Env, "GOEXPERIMENT=nogreenteagc")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}
	return out
}
