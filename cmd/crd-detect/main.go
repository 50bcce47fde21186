// Command crd-detect: see man crd-detect and lib/tool/crddetect.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crddetect"
)

func main() { os.Exit(cli.Main("crd-detect", crddetect.Run, cli.SignalsLazy)) }
