package cli

import (
	"context"
	"io"
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/logging"
)

// Main is every command's main: it runs run with the process's arguments and
// standard streams under ctx (which main cancels on SIGINT/SIGTERM through
// signal.NotifyContext) and returns the exit code for os.Exit. It is the only
// place, with cmd/, that reads os.Args; the testscripts register the same
// function, so they exercise exactly what the binaries do.
func Main(ctx context.Context, tool string, run RunFunc) int {
	return Exec(ctx, tool, run, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// MainService is Main for a program that runs as a systemd service (the
// daemon, and the `crd-lock step` children that share its stderr): when
// JOURNAL_STREAM names its stderr, stderr is a logging.Journal, so every log
// line carries its journald priority (`journalctl -p warning` finds the
// warnings). Other tools keep Main: a writer that is not an *os.File would
// make os/exec copy a child's stderr through a pipe, and `crd-lock hold`
// must hand its command the real stream.
func MainService(ctx context.Context, tool string, run RunFunc) int {
	stderr := ServiceStderr(os.Getenv("JOURNAL_STREAM"), os.Stderr)
	return Exec(ctx, tool, run, os.Args[1:], os.Stdin, os.Stdout, stderr)
}

// ServiceStderr returns stderr as a logging.Journal when journalStream (the
// value of JOURNAL_STREAM) names it, else stderr itself.
func ServiceStderr(journalStream string, stderr *os.File) io.Writer {
	if logging.IsJournalStream(journalStream, stderr) {
		return logging.Journal{W: stderr}
	}
	return stderr
}
