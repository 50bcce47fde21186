package gate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// fakeRemote answers the alert checks with fixed results and records the
// phases it was asked about.
type fakeRemote struct {
	res    []CheckResult
	err    error
	phases *[]string
}

func (f fakeRemote) Check(_ context.Context, phase string) ([]CheckResult, error) {
	*f.phases = append(*f.phases, phase)
	return f.res, f.err
}

func TestRunWithRemote(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "check", "echo ran > "+filepath.Join(dir, "ran"), 0o755)
	idle := proc.Result{ExitCode: 3, Stdout: "inactive\n"}
	quiet := CheckResult{Name: CheckAlerts, Passed: true, Reason: "no matching alert firing at http://am:9093"}
	firing := CheckResult{Name: CheckAlerts, Reason: "alerts firing at http://am:9093: NodeDown{instance=\"n1\"}", Blocking: []string{`NodeDown{instance="n1"}`}}
	tests := []struct {
		name   string
		phase  string
		remote fakeRemote
		code   exitcode.Code
		reason string
		checks []string
		ran    bool
	}{
		{"quiet: built-in, alerts, then the script", PhasePreLock, fakeRemote{res: []CheckResult{quiet}}, exitcode.OK,
			"none of backup.service is active; no matching alert firing at http://am:9093; health script " + script + " exited 0",
			[]string{CheckInactiveUnits, CheckAlerts}, true},
		{"a firing alert blocks before the script", PhaseUnderLock, fakeRemote{res: []CheckResult{firing}}, exitcode.HealthBlocked,
			firing.Reason, []string{CheckInactiveUnits, CheckAlerts}, false},
		{"after the reboot: alerts, not the built-in checks", PhasePostReboot, fakeRemote{res: []CheckResult{firing}}, exitcode.HealthBlocked,
			firing.Reason, []string{CheckAlerts}, false},
		{"an interruption is not a verdict", PhasePreLock, fakeRemote{err: exitcode.Errorf(exitcode.Interrupted, "interrupted")}, exitcode.Interrupted,
			"interrupted", []string{CheckInactiveUnits}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "ran"))
			var phases []string
			tt.remote.phases = &phases
			c := testContext()
			c.Phase = tt.phase
			c.Checks = Checks{InactiveUnits: []string{"backup.service"}, Remote: tt.remote}
			var specs []proc.Spec
			r := Run(context.Background(), unitRunner{idle, &specs}, script, 5*time.Second, c)
			if exitcode.CodeOf(r.Err()) != tt.code || r.Reason != tt.reason {
				t.Errorf("Run = %v, reason %q; want %v, %q", r.Err(), r.Reason, tt.code, tt.reason)
			}
			var names []string
			for _, chk := range r.Checks {
				names = append(names, chk.Name)
			}
			if !slices.Equal(names, tt.checks) {
				t.Errorf("checks %q, want %q", names, tt.checks)
			}
			if !slices.Equal(phases, []string{tt.phase}) {
				t.Errorf("remote asked for phases %q, want [%s]", phases, tt.phase)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); (err == nil) != tt.ran {
				t.Errorf("script ran: %v, want %v", err == nil, tt.ran)
			}
		})
	}
}
