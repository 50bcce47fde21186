// Command crd-window: see man crd-window and lib/tool/crdwindow.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdwindow"
)

func main() { os.Exit(cli.Main("crd-window", crdwindow.Run, cli.SignalsLazy)) }
