package detect

import (
	"context"
	"os/exec"
	"strings"
	"sync"

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
