// Command crd-gate: see man crd-gate and lib/tool/crdgate.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdgate"
)

func main() { os.Exit(cli.Main("crd-gate", crdgate.Run, cli.SignalsAtStart)) }
