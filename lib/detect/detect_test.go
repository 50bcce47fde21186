package detect

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		specs   []detectspec.Detector
		wantErr string
	}{
		{"empty list", nil, "reboot_required_detectors: is empty"},
		{"missing type", []detectspec.Detector{{}}, "reboot_required_detectors[0].type: is missing"},
		{"unknown type", []detectspec.Detector{{Type: "auto"}, {Type: "magic"}}, `reboot_required_detectors[1].type: "magic" is not a detector type`},
		{"file without path", []detectspec.Detector{{Type: "file"}}, "reboot_required_detectors[0].path: must be set to an absolute path"},
		{"file relative path", []detectspec.Detector{{Type: "file", Path: "run/x"}}, `"run/x" is not an absolute path`},
		{"file with cmd", []detectspec.Detector{{Type: "file", Path: "/x", Cmd: []string{"y"}}}, "type file takes path, not cmd"},
		{"command without cmd", []detectspec.Detector{{Type: "command"}}, "reboot_required_detectors[0].cmd: a command detector needs cmd"},
		{"command empty argv0", []detectspec.Detector{{Type: "command", Cmd: []string{""}}}, "needs cmd"},
		{"command with path", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, Path: "/y"}}, "type command takes cmd, not path"},
		{"code out of range", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, SuccessExitCodes: []int{256}}}, "success_exit_codes: 256 is not an exit code"},
		{"negative code", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, NotNeededExitCodes: []int{-1}}}, "not_needed_exit_codes: -1 is not an exit code"},
		{"127 declared", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, SuccessExitCodes: []int{127}}}, "127 means"},
		{"126 declared", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, NotNeededExitCodes: []int{126}}}, "126 means"},
		{"overlap", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, SuccessExitCodes: []int{1, 2}, NotNeededExitCodes: []int{2}}}, "exit code 2 is in both"},
		{"default overlap", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, SuccessExitCodes: []int{0}}}, "exit code 0 is in both"},
		{"negative timeout", []detectspec.Detector{{Type: "command", Cmd: []string{"x"}, TimeoutSec: -1}}, "timeout_sec: -1 must not be negative"},
		{"codes on a file", []detectspec.Detector{{Type: "file", Path: "/x", SuccessExitCodes: []int{1}}}, "apply to type command only"},
		{"auto with path", []detectspec.Detector{{Type: "auto", Path: "/x"}}, "type auto takes neither path nor cmd"},
		{"kernel with cmd", []detectspec.Detector{{Type: "kernel", Cmd: []string{"x"}}}, "type kernel takes neither path nor cmd"},
		{"reserved name", []detectspec.Detector{{Type: "auto", Name: "any"}}, `reboot_required_detectors[0].name: "any" is reserved`},
		{"duplicate names", []detectspec.Detector{{Type: "auto", Name: "a"}, {Type: "kernel", Name: "a"}}, `reboot_required_detectors[1].name: "a" is used by another detector`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.specs, Env{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New() error %v, want %q", err, tt.wantErr)
			}
			if c := exitcode.CodeOf(err); c != exitcode.Config {
				t.Errorf("code %v, want config", c)
			}
		})
	}
}

func TestNewNames(t *testing.T) {
	ds, err := New([]detectspec.Detector{
		{Type: "auto"}, {Type: "auto"}, {Type: "kernel", Name: "k"},
		{Type: "file", Path: "/var/run/../run/x"}, {Type: "command", Cmd: []string{"a", "b"}}, {Type: "auto"},
	}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	var names, types []string
	for _, d := range ds {
		names = append(names, d.Name())
		types = append(types, d.Type())
	}
	want := []string{"auto", "auto#2", "k", "file:/var/run/../run/x", "command:a b", "auto#3"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if !slices.Equal(types, []string{"auto", "auto", "kernel", "file", "command", "auto"}) {
		t.Errorf("types %q", types)
	}
	if r := ds[1].Detect(context.Background()); r.Name != "auto#2" {
		t.Errorf("result name %q, want auto#2", r.Name)
	}
}

// stub is a detector with a fixed answer.
type stub struct {
	name     string
	required bool
	err      string
	ran      *int
}

func (s stub) Name() string { return s.name }
func (s stub) Type() string { return "stub" }
func (s stub) Detect(context.Context) Result {
	if s.ran != nil {
		*s.ran++
	}
	return Result{Name: s.name, Type: "stub", Required: s.required, Err: s.err}
}

func TestCheck(t *testing.T) {
	yes, no, bad, bad2 := stub{name: "yes", required: true}, stub{name: "no"}, stub{name: "bad", err: "broken"}, stub{name: "bad2", err: "worse"}
	// A broken detector that also claims "required" must not count.
	liar := stub{name: "liar", required: true, err: "half an answer"}
	tests := []struct {
		name         string
		ds           []Detector
		wantRequired bool
		wantCode     exitcode.Code
		wantErr      string
		wantFired    []string
	}{
		{"none", nil, false, exitcode.DetectorError, "no detectors configured", nil},
		{"one says needed", []Detector{no, yes}, true, exitcode.OK, "", []string{"yes"}},
		{"none says needed", []Detector{no, no}, false, exitcode.No, "", nil},
		{"an error alone", []Detector{no, bad}, false, exitcode.DetectorError, "detect: detector bad failed: broken", nil},
		{"an error beats needed", []Detector{yes, bad}, false, exitcode.DetectorError, "another detector says a reboot is needed, but no reboot is done on a partial answer", []string{"yes"}},
		{"several errors", []Detector{bad, bad2, no}, false, exitcode.DetectorError, "detector bad failed: broken (and 1 more)", nil},
		{"error with required set", []Detector{liar}, false, exitcode.DetectorError, "half an answer", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Check(context.Background(), tt.ds)
			if rep.RebootRequired != tt.wantRequired || rep.Code() != tt.wantCode {
				t.Errorf("required=%v code=%v, want %v %v", rep.RebootRequired, rep.Code(), tt.wantRequired, tt.wantCode)
			}
			if tt.wantErr == "" && rep.Err != nil || tt.wantErr != "" && (rep.Err == nil || !strings.Contains(rep.Err.Error(), tt.wantErr)) {
				t.Errorf("err %v, want %q", rep.Err, tt.wantErr)
			}
			if len(rep.Detectors) != len(tt.ds) {
				t.Errorf("%d results for %d detectors", len(rep.Detectors), len(tt.ds))
			}
			var fired []string
			for _, r := range rep.Fired() {
				fired = append(fired, r.Name)
			}
			if !slices.Equal(fired, tt.wantFired) {
				t.Errorf("fired %q, want %q", fired, tt.wantFired)
			}
		})
	}
}

func TestCheckInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := 0
	rep := Check(ctx, []Detector{stub{name: "a", required: true, ran: &ran}, stub{name: "b", ran: &ran}})
	if rep.Code() != exitcode.Interrupted || rep.RebootRequired || ran != 0 {
		t.Fatalf("code %v required %v ran %d", rep.Code(), rep.RebootRequired, ran)
	}
	if len(rep.Detectors) != 2 || rep.Detectors[0].Err != "not run: interrupted" {
		t.Errorf("results %+v", rep.Detectors)
	}
}

func TestCheckRealCommandCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ds, err := New([]detectspec.Detector{{Type: "command", Cmd: []string{"sleep", "30"}}}, Env{Runner: cancelRunner{cancel}})
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(ctx, ds)
	if rep.Code() != exitcode.Interrupted || !strings.Contains(rep.Detectors[0].Err, "interrupted") {
		t.Fatalf("code %v results %+v", rep.Code(), rep.Detectors)
	}
}

// cancelRunner cancels the check while the real command runs.
type cancelRunner struct{ cancel context.CancelFunc }

func (c cancelRunner) Run(ctx context.Context, spec proc.Spec) proc.Result {
	c.cancel()
	return proc.Exec{}.Run(ctx, spec)
}

func TestRebootRequired(t *testing.T) {
	ctx := context.Background()
	if ok, err := RebootRequired(ctx, stub{name: "y", required: true}); !ok || err != nil {
		t.Errorf("got %v %v", ok, err)
	}
	ok, err := RebootRequired(ctx, stub{name: "b", required: true, err: "broken"})
	if ok || exitcode.CodeOf(err) != exitcode.DetectorError || err.Error() != "detect: b: broken" {
		t.Errorf("got %v %v", ok, err)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("  a\n\tb  ", 10); got != "a b" {
		t.Errorf("got %q", got)
	}
	if got := oneLine("abcdef", 3); got != "abc…" {
		t.Errorf("got %q", got)
	}
}
