// Command crd-detect: see man crd-detect and lib/tool/crddetect.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	_ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve" // before yaml.v3's init: see its doc
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crddetect"
)

func main() { os.Exit(cli.Main("crd-detect", crddetect.Run, cli.SignalsLazy)) }
