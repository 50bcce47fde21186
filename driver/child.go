package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/logging"
)

// maxChildOutput bounds the JSON a child may print.
const maxChildOutput = 4 << 20

// DefaultStopGrace is how long a child has after SIGTERM to release its
// lease and exit before it is killed.
const DefaultStopGrace = 10 * time.Second

// Child runs one cluster step: step with args (one of protocol's *Args
// values, nil for none) over cfg. Run decodes the child's one JSON object
// into out and returns its exit code; err is set only when the child could
// not be run or did not answer with JSON (then code says what that maps
// to).
type Child interface {
	Run(ctx context.Context, step string, args any, cfg config.Config, out any) (exitcode.Code, error)
}

// ExecChild runs `Path step NAME` for real, its protocol.Request on stdin.
type ExecChild struct {
	// Path is the crd-lock binary.
	Path string
	// Stderr receives the child's stderr (its JSON log lines).
	Stderr io.Writer
	// Env is the child's environment (nil: the daemon's).
	Env []string
	// Grace is the time between SIGTERM and SIGKILL when ctx ends (0: DefaultStopGrace).
	Grace time.Duration
	// Root, when set, is the request's root: the child must read the same
	// boot id and detector files as the daemon (tests, containers).
	Root string
	// LogLevel and LogFormat, when set, are the request's, so that the
	// child's lines on the shared stderr (the journal) look like the
	// parent's and follow its level.
	LogLevel, LogFormat string
}

// Run implements Child. When ctx ends the child gets SIGTERM (it releases
// its lease and exits 130), and SIGKILL after Grace.
func (c ExecChild) Run(ctx context.Context, step string, args any, cfg config.Config, out any) (exitcode.Code, error) {
	stdin, err := c.request(step, args, &cfg)
	if err != nil {
		return exitcode.Internal, err
	}
	cmd := exec.Command(c.Path, protocol.ChildCommand, step)
	cmd.Env = c.Env
	// Should the daemon die without stopping it (SIGKILL, the OOM killer, a
	// supervisor that kills only the main process), the child gets SIGTERM:
	// a cycle child then gives its seat up instead of going on to reboot
	// the node with no daemon left to watch the local checks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// The configuration goes in, and the result comes back, through
	// in-memory files rather than pipes: os/exec then needs no copying
	// goroutines, which an idle daemon would wake every publication
	// (docs/performance.md, "Wakeups"). Pipes remain the fallback.
	var stdout limitedBuffer
	stdout.max = maxChildOutput
	inFile, outFile := memFile("crd-request", stdin), memFile("crd-result", nil)
	defer closeFiles(inFile, outFile)
	if inFile != nil && outFile != nil {
		cmd.Stdin, cmd.Stdout = inFile, outFile
	} else {
		cmd.Stdin, cmd.Stdout = bytes.NewReader(stdin), &stdout
	}
	// The real stream, not a wrapper: the child inherits the fd (no copying
	// pipe) and finds the journal through JOURNAL_STREAM itself.
	cmd.Stderr = logging.Unwrap(c.Stderr)
	if err := cmd.Start(); err != nil {
		return exitcode.EtcdUnavailable, fmt.Errorf("driver: cannot start %s step %s: %w; install crd-lock next to clusterrebootd or pass --crd-lock", c.Path, step, err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			grace := c.Grace
			if grace <= 0 {
				grace = DefaultStopGrace
			}
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-t.C:
				_ = cmd.Process.Kill()
			case <-done:
			}
		case <-done:
		}
	}()
	waitExit(cmd.Process.Pid)
	werr := cmd.Wait()
	close(done)
	code := exitcode.OK
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		code = exitcode.Code(ee.ExitCode())
		if ee.ExitCode() < 0 { // killed by a signal
			if ctx.Err() != nil { // ours: the daemon stops or reloads
				code = exitcode.Interrupted
				break
			}
			// Not ours: the OOM killer, an operator, a crash. Whatever it
			// printed is not an answer.
			sig := "a signal"
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				sig = ws.Signal().String()
			}
			return exitcode.Internal, fmt.Errorf("driver: %s step %s was killed (%s); see the kernel log for the OOM killer", c.Path, step, sig)
		}
	case werr != nil:
		return exitcode.Internal, fmt.Errorf("driver: %s step %s: %w", c.Path, step, werr)
	}
	if cmd.Stdout == outFile {
		if _, err := outFile.Seek(0, io.SeekStart); err == nil {
			_, _ = io.Copy(&stdout, outFile)
		}
	}
	if err := protocol.DecodeResult(stdout.Bytes(), out); err != nil {
		// Without a result, exit 0 or 1 is no answer: above all not "no
		// reboot needed", which would make the node look idle.
		if code == exitcode.OK || code == exitcode.No {
			code = exitcode.Internal
		}
		return code, fmt.Errorf("driver: %s step %s exited %d without a result: %w", c.Path, step, int(code), err)
	}
	return code, nil
}

// waitExit returns once process pid has exited, without reaping it (Wait
// does that next, at once). It waits in the runtime's network poller on a
// pidfd instead of in a wait4 system call: a goroutine in a long system call
// keeps its P, and the runtime's monitor thread then polls until it takes
// the P back, wake-ups for each child an idle daemon runs
// (docs/performance.md, "Wakeups"). On any error it
// returns at once and Wait blocks as before. It reports whether it waited on
// the pidfd until the process exited.
func waitExit(pid int) (pidfd bool) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Signo is SIGCHLD once the process has exited, 0 while it runs.
		exited = err == nil && info.Signo != 0
		return err != nil || exited
	})
	return err == nil && exited
}

// memFile returns an anonymous in-memory file (memfd) holding data, read and
// write offset at 0, or nil when the kernel or a sandbox refuses one.
func memFile(name string, data []byte) *os.File {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil
		}
	}
	return f
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// request is the document a child of step reads on stdin: step's
// protocol.Request with args and cfg (nil: none), the daemon's root and
// logging.
func (c ExecChild) request(step string, args any, cfg *config.Config) ([]byte, error) {
	req, err := protocol.NewRequest(step, args, cfg)
	if err != nil {
		return nil, err
	}
	req.Root, req.LogLevel, req.LogFormat = c.Root, c.LogLevel, c.LogFormat
	return req.Encode()
}

// limitedBuffer keeps at most max bytes.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
