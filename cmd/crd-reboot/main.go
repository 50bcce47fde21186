// Command crd-reboot: see man crd-reboot and cmd/tool/crdreboot.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crdreboot"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, "crd-reboot", crdreboot.Run)
	stop()
	os.Exit(code)
}
