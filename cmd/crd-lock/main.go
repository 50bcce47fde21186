// Command crd-lock: see man crd-lock and lib/tool/crdlock.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdlock"
)

func main() { os.Exit(cli.Main("crd-lock", crdlock.Run, cli.SignalsAtStart)) }
