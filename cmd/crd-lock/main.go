// Command crd-lock: see man crd-lock and cmd/tool/crdlock.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdlock"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// main is the only reader of the process's arguments, streams and signals.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// `crd-lock step` runs under the daemon and shares its stderr, the
	// journal (cli.ServiceStderr); other commands keep the plain stream
	// (hold hands it to its command).
	var stderr io.Writer = os.Stderr
	if len(os.Args) > 1 && os.Args[1] == "step" {
		stderr = cli.ServiceStderr(os.Getenv("JOURNAL_STREAM"), os.Stderr)
	}
	code := cli.Exec(ctx, "crd-lock", crdlock.Run, os.Args[1:], os.Stdin, os.Stdout, stderr)
	stop()
	os.Exit(code)
}
