// Command crd-reboot: see man crd-reboot and lib/tool/crdreboot.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	_ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve" // before yaml.v3's init: see its doc
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdreboot"
)

func main() { os.Exit(cli.Main("crd-reboot", crdreboot.Run, cli.SignalsAtStart)) }
