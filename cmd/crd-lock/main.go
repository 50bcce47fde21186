// Command crd-lock: see man crd-lock and cmd/tool/crdlock.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdlock"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// `crd-lock step` runs under the daemon and shares its stderr, the
	// journal; other commands keep the plain stream (hold hands it to its
	// command).
	run := cli.Main
	if len(os.Args) > 1 && os.Args[1] == "step" {
		run = cli.MainService
	}
	code := run(ctx, "crd-lock", crdlock.Run)
	stop()
	os.Exit(code)
}
