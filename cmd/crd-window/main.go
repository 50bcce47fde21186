// Command crd-window: see man crd-window and cmd/tool/crdwindow.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdwindow"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// main is the only reader of the process's arguments, streams and signals.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Exec(ctx, "crd-window", crdwindow.Run, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
