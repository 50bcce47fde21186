// Package proc runs external commands the way every clusterrebootd step needs
// them run: argv without a shell, in a process group of their own, with a
// timeout that terminates the whole group (SIGTERM, then SIGKILL after a
// grace period), and with stdout/stderr captured up to a bound.
//
// Detectors, the health gate, reboot hooks and the reboot command all go
// through a Runner, so tests can substitute one. Each of them runs as root
// (or the tool's user), so Exec refuses a program that anyone else could
// change (lib/trust), before it starts anything.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/trust"
)

// DefaultMaxOutput bounds each captured stream (64 KiB).
const DefaultMaxOutput = 64 << 10

// DefaultGrace is how long a group has between SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// Spec describes one command.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in PATH of
	// Env when it has no slash.
	Argv []string
	// Env is the complete environment of the command (nil: empty).
	Env []string
	// Dir is the working directory ("" = the caller's).
	Dir string
	// Timeout bounds the run; 0 means only ctx bounds it.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL (0: DefaultGrace).
	Grace time.Duration
	// MaxOutput bounds each of stdout and stderr (0: DefaultMaxOutput).
	MaxOutput int
	// Stdin feeds the command (nil: /dev/null).
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the streams instead of the capture
	// (Result.Stdout/Stderr stay empty for that stream).
	Stdout, Stderr io.Writer
}

// Result is what happened.
type Result struct {
	// ExitCode is the exit status, or -1 when the command did not exit
	// normally (killed by a signal, or never started).
	ExitCode int
	// Signal names the signal that ended the command, if any, as SIGKILL
	// (not Go's "killed", which reads as "killed by signal killed").
	Signal string
	// Stdout and Stderr are the captured streams, each at most MaxOutput bytes.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	// TimedOut is set when Timeout expired and the group was terminated.
	TimedOut bool
	// Canceled is set when ctx ended first and the group was terminated.
	Canceled bool
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// StartErr is set when the command could not be started at all (not
	// found, not executable); then ExitCode is -1.
	StartErr error
}

// OK reports whether the command ran and exited 0.
func (r Result) OK() bool { return r.StartErr == nil && !r.TimedOut && !r.Canceled && r.ExitCode == 0 }

// Describe says in a few words how a command that did not succeed ended,
// the same way for every caller (hooks, the reboot command): "could not be
// started: CAUSE" (with the path: a hook's message names the hook, not its
// program),
// "timed out after TIMEOUT", "was interrupted", "was killed by signal
// SIGKILL" or "exited N", then ": " and the last line of its stderr (else
// of its stdout) when there is one. timeout is the limit the caller set (Spec.Timeout).
func (r Result) Describe(timeout time.Duration) string {
	var why string
	switch {
	case r.StartErr != nil:
		why = fmt.Sprintf("could not be started: %v", r.StartErr)
	case r.TimedOut:
		why = fmt.Sprintf("timed out after %s", timeout)
	case r.Canceled:
		why = "was interrupted"
	case r.Signal != "":
		why = "was killed by signal " + r.Signal
	default:
		why = fmt.Sprintf("exited %d", r.ExitCode)
	}
	if l := LastLine(r.Stderr); l != "" {
		why += ": " + l
	} else if l := LastLine(r.Stdout); l != "" {
		why += ": " + l
	}
	return why
}

// NotFound reports whether the command could not be started because the
// program does not exist.
func (r Result) NotFound() bool {
	return r.StartErr != nil && (errors.Is(r.StartErr, exec.ErrNotFound) || errors.Is(r.StartErr, syscall.ENOENT))
}

// Runner runs commands. Exec is the real one.
type Runner interface {
	Run(ctx context.Context, spec Spec) Result
}

// Exec runs commands for real.
type Exec struct{}

// Run implements Runner.
func (Exec) Run(ctx context.Context, spec Spec) Result {
	res := Result{ExitCode: -1}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		res.StartErr = errors.New("empty command")
		return res
	}
	maxOut := spec.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	grace := spec.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}

	path := spec.Argv[0]
	if lp, err := lookPath(path, spec.Env); err != nil {
		res.StartErr = err
		return res
	} else {
		path = lp
	}
	if err := trusted(path, spec.Dir); err != nil {
		res.StartErr = err
		return res
	}
	cmd := &exec.Cmd{Path: path, Args: spec.Argv, Env: spec.Env, Dir: spec.Dir}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = spec.Stdin
	outBuf := &capped{max: maxOut}
	errBuf := &capped{max: maxOut}
	cmd.Stdout, cmd.Stderr = outBuf, errBuf
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
	}
	if spec.Stderr != nil {
		cmd.Stderr = spec.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Once the leader is gone, do not wait forever for pipes that a
	// straggler in the group still holds.
	cmd.WaitDelay = grace

	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.StartErr = explainStart(path, err)
		return res
	}
	pgid := cmd.Process.Pid

	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var waitErr error
	select {
	case waitErr = <-done:
	case <-timeout:
		res.TimedOut = true
		waitErr = terminate(pgid, grace, done)
	case <-ctx.Done():
		res.Canceled = true
		waitErr = terminate(pgid, grace, done)
	}
	// Nothing the command started may outlive it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	res.Duration = time.Since(start)

	res.Stdout, res.StdoutTruncated = outBuf.String(), outBuf.truncated
	res.Stderr, res.StderrTruncated = errBuf.String(), errBuf.truncated
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = SignalName(ws.Signal())
			res.ExitCode = -1
		} else {
			res.ExitCode = ps.ExitCode()
		}
	} else if waitErr != nil {
		res.StartErr = waitErr
	}
	return res
}

// terminate sends SIGTERM to the group, SIGKILL after grace, and waits.
func terminate(pgid int, grace time.Duration, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}

// lookPath resolves a program name without a slash through PATH from env
// (not the caller's environment: the command's).
func lookPath(name string, env []string) (string, error) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name, nil
		}
	}
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			pathVar = kv[5:]
		}
	}
	for _, dir := range splitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// trusted refuses, as an ErrUntrusted, a program that someone other than
// root or this process's user could change. A program that does not exist
// is left for exec to report as usual.
func trusted(path, dir string) error {
	if !filepath.IsAbs(path) {
		if dir == "" {
			dir, _ = os.Getwd()
		}
		path = filepath.Join(dir, path)
	}
	err := trust.Check(path, os.Geteuid())
	if !trust.IsUntrusted(err) {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrUntrusted, err)
}

// ErrUntrusted is the start error of a program that someone other than root
// or this process's user could change: it is never run.
var ErrUntrusted = errors.New("refused to run")

// capped keeps at most max bytes of a stream: the first half and the last
// half, with a line saying how much was dropped between them. The head says
// how a command started, the tail how it ended: a health script's verdict is
// its last line, however much it printed before.
type capped struct {
	mu        sync.Mutex
	head      []byte
	tail      []byte
	max       int
	dropped   int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	headMax := c.max / 2
	if room := headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailMax := c.max - headMax
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - tailMax; over > 0 {
		c.dropped += over
		c.truncated = true
		if cap(c.tail) > 4*tailMax+4096 {
			c.tail = append([]byte(nil), c.tail[over:]...)
		} else {
			c.tail = c.tail[over:]
		}
	}
	return n, nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return string(c.head) + string(c.tail)
	}
	return string(c.head) + fmt.Sprintf("\n[... %d bytes dropped ...]\n", c.dropped) + string(c.tail)
}

// explainStart names the missing interpreter when a script that exists
// cannot be started with ENOENT: "no such file or directory" about a file
// that is right there sends the reader the wrong way.
func explainStart(path string, err error) error {
	if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	f, oerr := os.Open(path)
	if oerr != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	interp, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return err
	}
	if fields := strings.Fields(interp); len(fields) > 0 {
		return fmt.Errorf("%w: its interpreter %s (the #! line) does not exist", err, fields[0])
	}
	return err
}

// SignalName is the C name of sig (SIGKILL), or "signal N" for one without
// a common name.
func SignalName(sig syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS"}
	if n, ok := names[sig]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}
