package detect

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// fakeRunner answers by argv (joined with spaces) and records every spec.
type fakeRunner struct {
	mu      sync.Mutex
	answers map[string]proc.Result
	specs   []proc.Spec
}

func (f *fakeRunner) Run(_ context.Context, spec proc.Spec) proc.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, spec)
	if r, ok := f.answers[strings.Join(spec.Argv, " ")]; ok {
		return r
	}
	return proc.Result{ExitCode: -1, StartErr: &exec.Error{Name: spec.Argv[0], Err: exec.ErrNotFound}}
}

// tree is a fake filesystem root: path -> content; content "->X" makes a
// symlink to X, a path ending in "/" a directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
