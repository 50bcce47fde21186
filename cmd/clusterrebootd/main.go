// Command clusterrebootd: see man clusterrebootd and cmd/tool/clusterrebootd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/clusterrebootd"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// main is the only reader of the process's arguments, streams, signals and
// of JOURNAL_STREAM: the daemon runs as a systemd service, so its stderr is
// the journal when JOURNAL_STREAM names it (cli.ServiceStderr).
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stderr := cli.ServiceStderr(os.Getenv("JOURNAL_STREAM"), os.Stderr)
	code := cli.Exec(ctx, "clusterrebootd", clusterrebootd.Run, os.Args[1:], os.Stdin, os.Stdout, stderr)
	stop()
	os.Exit(code)
}
