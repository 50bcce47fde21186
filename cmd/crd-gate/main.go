// Command crd-gate: see man crd-gate and cmd/tool/crdgate.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdgate"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, "crd-gate", crdgate.Run)
	stop()
	os.Exit(code)
}
