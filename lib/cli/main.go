package cli

import (
	"io"
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/logging"
)

// ServiceStderr returns stderr as a logging.Journal when journalStream (the
// value of JOURNAL_STREAM, read by the program's main) names it, else stderr
// itself. For a program that runs as a systemd service (the daemon, and the
// `crd-lock step` children that share its stderr): every log line then
// carries its journald priority (`journalctl -p warning` finds the
// warnings). Other tools keep the plain stream: a writer that is not an
// *os.File would make os/exec copy a child's stderr through a pipe, and
// `crd-lock hold` must hand its command the real stream.
func ServiceStderr(journalStream string, stderr *os.File) io.Writer {
	if logging.IsJournalStream(journalStream, stderr) {
		return logging.Journal{W: stderr}
	}
	return stderr
}
