package proc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

var shEnv = []string{"PATH=/usr/bin:/bin"}

func TestRun(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		check func(t *testing.T, r Result)
	}{
		{"exit zero", Spec{Argv: []string{"true"}, Env: shEnv}, func(t *testing.T, r Result) {
			if !r.OK() || r.ExitCode != 0 {
				t.Errorf("%+v", r)
			}
		}},
		{"exit code kept", Spec{Argv: []string{"sh", "-c", "exit 7"}, Env: shEnv}, func(t *testing.T, r Result) {
			if r.ExitCode != 7 || r.OK() {
				t.Errorf("%+v", r)
			}
		}},
		{"streams captured", Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2"}, Env: shEnv}, func(t *testing.T, r Result) {
			if r.Stdout != "out\n" || r.Stderr != "err\n" {
				t.Errorf("%+v", r)
			}
		}},
		{"output bounded", Spec{Argv: []string{"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x"}, Env: shEnv, MaxOutput: 100}, func(t *testing.T, r Result) {
			want := strings.Repeat("x", 50) + "\n[... 4900 bytes dropped ...]\n" + strings.Repeat("x", 50)
			if r.Stdout != want || !r.StdoutTruncated || r.StderrTruncated {
				t.Errorf("stdout %q truncated=%v, want the head, a line saying what was dropped, the tail", r.Stdout, r.StdoutTruncated)
			}
		}},
		// A script's verdict is its last line, however much it printed first.
		{"the last line survives a long output", Spec{Argv: []string{"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; echo; echo 'quorum lost on db-3'"}, Env: shEnv}, func(t *testing.T, r Result) {
			if !strings.HasSuffix(r.Stdout, "\nquorum lost on db-3\n") || len(r.Stdout) > DefaultMaxOutput+64 || !r.StdoutTruncated {
				t.Errorf("len=%d truncated=%v, tail %q", len(r.Stdout), r.StdoutTruncated, r.Stdout[max(0, len(r.Stdout)-40):])
			}
		}},
		{"not found", Spec{Argv: []string{"/nonexistent/prog"}}, func(t *testing.T, r Result) {
			if !r.NotFound() || r.ExitCode != -1 {
				t.Errorf("%+v", r)
			}
		}},
		{"not found in PATH", Spec{Argv: []string{"no-such-prog-crd"}, Env: shEnv}, func(t *testing.T, r Result) {
			if !r.NotFound() {
				t.Errorf("%+v", r)
			}
		}},
		{"empty argv", Spec{}, func(t *testing.T, r Result) {
			if r.StartErr == nil {
				t.Errorf("%+v", r)
			}
		}},
		{"env is exactly what was given", Spec{Argv: []string{"sh", "-c", "echo \"$FOO\""}, Env: append([]string{"FOO=bar"}, shEnv...)}, func(t *testing.T, r Result) {
			if r.Stdout != "bar\n" {
				t.Errorf("%q", r.Stdout)
			}
		}},
		{"stdin fed", Spec{Argv: []string{"cat"}, Env: shEnv, Stdin: strings.NewReader("hi")}, func(t *testing.T, r Result) {
			if r.Stdout != "hi" {
				t.Errorf("%q", r.Stdout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Exec{}.Run(context.Background(), tt.spec))
		})
	}
}

// A timeout must end the whole process group, including a grandchild that
// ignores nothing and would otherwise keep running (and keep the pipe open).
func TestTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	script := "sleep 60 & echo $! > " + pidfile + "; wait"
	r := Exec{}.Run(context.Background(), Spec{Argv: []string{"sh", "-c", script}, Env: shEnv,
		Timeout: 200 * time.Millisecond, Grace: 200 * time.Millisecond})
	if !r.TimedOut || r.OK() {
		t.Fatalf("want timed out, got %+v", r)
	}
	pid := testsupport.ReadPID(t, pidfile)
	// SIGKILL has been sent; give init a moment to reap it (loose bound).
	testsupport.WaitGone(t, pid, 5*time.Second, "the grandchild, after the timeout")
}

// A command that ignores SIGTERM is killed after the grace period.
func TestGraceThenKill(t *testing.T) {
	r := Exec{}.Run(context.Background(), Spec{Argv: []string{"sh", "-c", "trap '' TERM; sleep 30"}, Env: shEnv,
		Timeout: 100 * time.Millisecond, Grace: 100 * time.Millisecond})
	if !r.TimedOut || r.Signal == "" {
		t.Fatalf("want killed by signal, got %+v", r)
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	r := Exec{}.Run(ctx, Spec{Argv: []string{"sleep", "30"}, Env: shEnv, Grace: 100 * time.Millisecond})
	if !r.Canceled || r.OK() {
		t.Fatalf("want canceled, got %+v", r)
	}
}

func TestNotExecutable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Exec{}.Run(context.Background(), Spec{Argv: []string{p}})
	if r.StartErr == nil || r.NotFound() {
		t.Fatalf("want a start error that is not 'not found', got %+v", r)
	}
}

// A script whose #! interpreter is missing fails with ENOENT, about a file
// that exists: the error names the interpreter. It is still "not found" (a
// shell's 127).
func TestMissingInterpreter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/nonexistent -e\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Exec{}.Run(context.Background(), Spec{Argv: []string{p}})
	if r.StartErr == nil || !r.NotFound() || !strings.Contains(r.StartErr.Error(), "its interpreter /bin/nonexistent (the #! line) does not exist") {
		t.Fatalf("want the interpreter named, got %v", r.StartErr)
	}
}

// A program someone other than root or this user could change is never
// started (issue 17): here a link owned by nobody to /bin/true.
func TestExecRefusesUntrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "true")
	if err := os.Symlink("/bin/true", link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		uid  int
		ok   bool
	}{{"link owned by root", 0, true}, {"link owned by nobody", 65534, false}} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Lchown(link, tt.uid, 0); err != nil {
				t.Fatal(err)
			}
			res := Exec{}.Run(context.Background(), Spec{Argv: []string{link}})
			if res.OK() != tt.ok {
				t.Fatalf("OK() = %v, want %v (start error %v)", res.OK(), tt.ok, res.StartErr)
			}
			if !tt.ok && (!errors.Is(res.StartErr, ErrUntrusted) || !strings.Contains(res.StartErr.Error(), "symbolic link "+link+" is owned by uid 65534")) {
				t.Errorf("start error %v", res.StartErr)
			}
		})
	}
}

// A command that dies of a signal says which, by its C name (issue 17:
// "killed by signal killed").
func TestSignalName(t *testing.T) {
	for _, tt := range []struct {
		name, script, want string
	}{{"kill", "kill -KILL $$", "SIGKILL"}, {"term", "kill -TERM $$", "SIGTERM"}, {"rtmin", "kill -s 40 $$", "signal 40"}} {
		t.Run(tt.name, func(t *testing.T) {
			r := Exec{}.Run(context.Background(), Spec{Argv: []string{"/bin/sh", "-c", tt.script}})
			if r.Signal != tt.want {
				t.Errorf("Signal = %q, want %q", r.Signal, tt.want)
			}
		})
	}
}

func TestLastLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"a\nquorum lost on db-3\n\n  ", "quorum lost on db-3"},
		{strings.Repeat("z", 300), strings.Repeat("z", 200) + "..."},
		{"\n\n", ""},
		{"", ""},
	} {
		if got := LastLine(tt.in); got != tt.want {
			t.Errorf("LastLine(%.20q) = %.30q, want %.30q", tt.in, got, tt.want)
		}
	}
}

// Describe is the one description of a failed run every caller uses.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{ExitCode: -1, StartErr: &fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOENT}}, "could not be started: fork/exec /x: no such file or directory"},
		{Result{ExitCode: -1, TimedOut: true, Signal: "SIGKILL", Stderr: "slow\n"}, "timed out after 5s: slow"},
		{Result{ExitCode: -1, Canceled: true, Signal: "SIGTERM"}, "was interrupted"},
		{Result{ExitCode: -1, Signal: "SIGKILL"}, "was killed by signal SIGKILL"},
		{Result{ExitCode: 3, Stdout: "one\ntwo\n"}, "exited 3: two"},
		{Result{ExitCode: 3, Stdout: "out\n", Stderr: "err\n\n"}, "exited 3: err"},
	} {
		if got := tc.r.Describe(5 * time.Second); got != tc.want {
			t.Errorf("%+v: Describe = %q, want %q", tc.r, got, tc.want)
		}
	}
}
