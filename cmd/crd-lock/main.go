// Command crd-lock: see man crd-lock and lib/tool/crdlock.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	_ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve" // before yaml.v3's init: see its doc
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdlock"
)

func main() { os.Exit(cli.Main("crd-lock", crdlock.Run, cli.SignalsAtStart)) }
