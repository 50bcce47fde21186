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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, "crd-window", crdwindow.Run)
	stop()
	os.Exit(code)
}
