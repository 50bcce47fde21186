package stackreserve_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/buildtest"
)

// The short-lived tools grow their stack once, before yaml.v3 and regexp
// initialise: their binaries must initialise this package first (the order is
// what GODEBUG=inittrace=1 prints). The daemon must not import it. The
// binaries are built as `make build` builds them, so the test fails if an
// import is dropped or the package is renamed to sort later.
func TestInitOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	const self = "github.com/clusterrebootd/clusterrebootd/lib/stackreserve"
	dir := t.TempDir()
	for _, tool := range []string{"crd-detect", "crd-window", "crd-gate", "crd-reboot", "crd-lock", "clusterrebootd"} {
		t.Run(tool, func(t *testing.T) {
			bin := buildtest.Build(t, dir, tool, tool)
			cmd := exec.Command(bin, "--help")
			cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
			out, _ := cmd.CombinedOutput()
			var order []string
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
					order = append(order, f[1])
				}
			}
			at := func(pkg string) int {
				for i, p := range order {
					if p == pkg {
						return i
					}
				}
				return -1
			}
			yaml, re := at("gopkg.in/yaml%2ev3"), at("regexp")
			if yaml < 0 || re < 0 {
				t.Fatalf("no init line for yaml.v3 or regexp in %s's inittrace:\n%s", tool, out)
			}
			me := at(self)
			if tool == "clusterrebootd" {
				if me >= 0 {
					t.Errorf("the daemon imports %s; its idle footprint must not carry the larger stack", self)
				}
				return
			}
			if me < 0 || me > yaml || me > re {
				t.Errorf("%s initialises %s at position %d, yaml.v3 at %d, regexp at %d: it must come first", tool, self, me, yaml, re)
			}
		})
	}
}
