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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.MainService(ctx, "clusterrebootd", clusterrebootd.Run)
	stop()
	os.Exit(code)
}
