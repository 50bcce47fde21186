// Command crd-detect: see man crd-detect and cmd/tool/crddetect.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/cmd/tool/crddetect"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, "crd-detect", crddetect.Run)
	stop()
	os.Exit(code)
}
