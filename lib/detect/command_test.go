package detect

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

func TestCommandDetectorFake(t *testing.T) {
	tests := []struct {
		name         string
		spec         detectspec.Detector
		res          proc.Result
		wantRequired bool
		wantDetail   string
		wantErr      string
	}{
		{"default needed 1", detectspec.Detector{}, proc.Result{ExitCode: 1, Stdout: "Reboot is required\nto fully utilize these updates.\n"}, true, "exited 1 (reboot needed): Reboot is required to fully utilize these updates.", ""},
		{"default not needed 0", detectspec.Detector{}, proc.Result{ExitCode: 0}, false, "exited 0 (no reboot needed)", ""},
		{"declared codes", detectspec.Detector{SuccessExitCodes: []int{102}, NotNeededExitCodes: []int{0, 100}}, proc.Result{ExitCode: 102}, true, "exited 102", ""},
		{"declared not needed", detectspec.Detector{SuccessExitCodes: []int{102}, NotNeededExitCodes: []int{0, 100}}, proc.Result{ExitCode: 100}, false, "exited 100 (no reboot needed)", ""},
		{"undeclared code", detectspec.Detector{}, proc.Result{ExitCode: 2, Stderr: "boom"}, false, "", "exited 2, which is in neither success_exit_codes [1] (needed) nor not_needed_exit_codes [0]; fix the command or declare the code; output: boom"},
		{"wrapper says not found", detectspec.Detector{}, proc.Result{ExitCode: 127}, false, "", "exited 127: a program it runs was not found"},
		{"wrapper says not executable", detectspec.Detector{}, proc.Result{ExitCode: 126}, false, "", "exited 126"},
		{"not found", detectspec.Detector{}, proc.Result{ExitCode: -1, StartErr: errors.New("exec: not found")}, false, "", "cannot start"},
		{"timed out", detectspec.Detector{TimeoutSec: 7}, proc.Result{ExitCode: -1, TimedOut: true, Signal: "SIGTERM"}, false, "", "timed out after 7s"},
		{"canceled", detectspec.Detector{}, proc.Result{ExitCode: -1, Canceled: true}, false, "", "interrupted"},
		{"signal", detectspec.Detector{}, proc.Result{ExitCode: -1, Signal: "SIGKILL"}, false, "", "killed by signal SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := &fakeRunner{answers: map[string]proc.Result{"/usr/bin/check -r": tt.res}}
			spec := tt.spec
			spec.Type, spec.Cmd = "command", []string{"/usr/bin/check", "-r"}
			ds, err := New([]detectspec.Detector{spec}, Env{Runner: fr})
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if r.Name != "command:/usr/bin/check -r" || r.Type != "command" {
				t.Errorf("name/type = %q/%q", r.Name, r.Type)
			}
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
			} else if r.Err != "" || r.Required != tt.wantRequired || !strings.Contains(r.Detail, tt.wantDetail) {
				t.Fatalf("result %+v; want required=%v detail containing %q", r, tt.wantRequired, tt.wantDetail)
			}
			if len(fr.specs) != 1 {
				t.Fatalf("ran %d times", len(fr.specs))
			}
			got := fr.specs[0]
			if !slices.Equal(got.Env, []string{"PATH=" + CommandPath, "LC_ALL=C"}) {
				t.Errorf("env = %q", got.Env)
			}
			wantTimeout := DefaultTimeout
			if tt.spec.TimeoutSec > 0 {
				wantTimeout = time.Duration(tt.spec.TimeoutSec) * time.Second
			}
			if got.Timeout != wantTimeout {
				t.Errorf("timeout = %v, want %v", got.Timeout, wantTimeout)
			}
		})
	}
}

// TestCommandDetectorReal runs real processes through proc.Exec.
func TestCommandDetectorReal(t *testing.T) {
	tests := []struct {
		name         string
		cmd          []string
		timeoutSec   int
		wantRequired bool
		wantErr      string
	}{
		{"exit 1 is needed", []string{"sh", "-c", "echo reboot please; exit 1"}, 0, true, ""},
		{"exit 0 is not needed", []string{"sh", "-c", "exit 0"}, 0, false, ""},
		{"exit 3 is an error", []string{"sh", "-c", "exit 3"}, 0, false, "exited 3"},
		{"shell's 127 is an error", []string{"sh", "-c", "no-such-program-crd"}, 0, false, "exited 127"},
		{"missing binary is an error", []string{"no-such-program-crd", "-r"}, 0, false, "no-such-program-crd not found (PATH=" + CommandPath + ")"},
		{"missing absolute binary is an error", []string{"/nonexistent/needs-restarting", "-r"}, 0, false, "not found"},
		{"not executable is an error", []string{"/etc/hostname"}, 0, false, "cannot start"},
		{"timeout is an error", []string{"sh", "-c", "sleep 30"}, 1, false, "timed out after 1s"},
		{"signal is an error", []string{"sh", "-c", "kill -KILL $$"}, 0, false, "killed by signal"},
		{"environment is fixed", []string{"sh", "-c", `test "$LC_ALL" = C && test -z "$HOME" && exit 1`}, 0, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ds, err := New([]detectspec.Detector{{Type: "command", Cmd: tt.cmd, TimeoutSec: tt.timeoutSec}}, Env{})
			if err != nil {
				t.Fatal(err)
			}
			r := ds[0].Detect(context.Background())
			if tt.wantErr != "" {
				if !strings.Contains(r.Err, tt.wantErr) || r.Required {
					t.Fatalf("result %+v, want error containing %q", r, tt.wantErr)
				}
				return
			}
			if r.Err != "" || r.Required != tt.wantRequired {
				t.Fatalf("result %+v, want required=%v", r, tt.wantRequired)
			}
		})
	}
}
