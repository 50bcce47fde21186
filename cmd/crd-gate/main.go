// Command crd-gate: see man crd-gate and lib/tool/crdgate.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	_ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve" // before yaml.v3's init: see its doc
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdgate"
)

func main() { os.Exit(cli.Main("crd-gate", crdgate.Run, cli.SignalsAtStart)) }
