package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/lib/logging"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// LazySignalContext returns a context that SIGINT or SIGTERM cancels, like
// signal.NotifyContext, except that the handlers are installed only when the
// first command starts under it (lib/proc Exec calls the hook). Until then the
// signals keep their default action: the tool has no process group to clean
// up yet, so it ends as any short-lived Unix tool does (shell status 128+N).
//
// Why: installing the handlers at start parks a thread on the signal queue;
// measured on a 2-core VM this costs 1.5-2 ms of a tool's 10 ms start-to-exit
// (docs/performance.md). crd-detect and crd-window, which are called from
// monitoring checks and shell chains, use it; tools that always run a command
// (crd-gate, crd-reboot, crd-lock) use signal.NotifyContext.
//
// stop releases the handlers (if any) and cancels the context.
func LazySignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	var (
		once sync.Once
		ch   chan os.Signal
	)
	arm := func() {
		once.Do(func() {
			ch = make(chan os.Signal, 1)
			signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
			go func() {
				select {
				case <-ch:
					cancel()
				case <-ctx.Done():
				}
			}()
		})
	}
	stop = func() {
		once.Do(func() {}) // no arming after stop
		if ch != nil {
			signal.Stop(ch)
		}
		cancel()
	}
	return proc.WithStartHook(ctx, arm), stop
}

// Signals says when a tool installs its SIGINT/SIGTERM handlers.
type Signals int

const (
	// SignalsAtStart installs them before Run (signal.NotifyContext): for tools
	// that always run a command or wait (crd-gate, crd-reboot, crd-lock, the
	// daemon).
	SignalsAtStart Signals = iota
	// SignalsLazy installs them when the first command starts
	// (LazySignalContext): for the quick local checks crd-detect and crd-window.
	SignalsLazy
)

// Main is every command's main: it runs run with the process's arguments and
// standard streams under a context that SIGINT/SIGTERM cancel (installed as s
// says) and returns the exit code for os.Exit. It is the only place, with
// cmd/, that reads os.Args; the testscripts register the same function, so
// they exercise exactly what the binaries do.
func Main(tool string, run RunFunc, s Signals) int { return mainWith(tool, run, s, os.Stderr) }

func mainWith(tool string, run RunFunc, s Signals, stderr io.Writer) int {
	var (
		ctx  context.Context
		stop context.CancelFunc
	)
	if s == SignalsLazy {
		ctx, stop = LazySignalContext(context.Background())
	} else {
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer stop()
	return Exec(ctx, tool, run, os.Args[1:], os.Stdin, os.Stdout, stderr)
}

// MainService is Main for a program that runs as a systemd service (the
// daemon, and the `crd-lock step` children that share its stderr): when
// JOURNAL_STREAM names its stderr, stderr is a logging.Journal, so every log
// line carries its journald priority (`journalctl -p warning` finds the
// warnings). Other tools keep Main: a writer that is not an *os.File would
// make os/exec copy a child's stderr through a pipe, and `crd-lock hold`
// must hand its command the real stream.
func MainService(tool string, run RunFunc, s Signals) int {
	return mainWith(tool, run, s, ServiceStderr(os.Getenv("JOURNAL_STREAM"), os.Stderr))
}

// ServiceStderr returns stderr as a logging.Journal when journalStream (the
// value of JOURNAL_STREAM) names it, else stderr itself.
func ServiceStderr(journalStream string, stderr *os.File) io.Writer {
	if logging.IsJournalStream(journalStream, stderr) {
		return logging.Journal{W: stderr}
	}
	return stderr
}
