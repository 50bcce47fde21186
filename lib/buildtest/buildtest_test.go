package buildtest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The Makefile and Build must build the same commands with the experiment.
func TestMakefileAgrees(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "LOCAL_TOOLS := "); ok {
			if got := strings.Fields(v); !slices.Equal(got, LocalTools) {
				t.Fatalf("Makefile's LOCAL_TOOLS is %v, buildtest.LocalTools %v: make them the same", got, LocalTools)
			}
			return
		}
	}
	t.Fatal("no 'LOCAL_TOOLS := ' line in the Makefile")
}
