// Command clusterrebootd: see man clusterrebootd and lib/tool/clusterrebootd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/clusterrebootd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainService(ctx, "clusterrebootd", clusterrebootd.Run)
	stop()
	os.Exit(code)
}
