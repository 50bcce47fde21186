// Command crd-reboot: see man crd-reboot and lib/tool/crdreboot.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdreboot"
)

func main() { os.Exit(cli.Main("crd-reboot", crdreboot.Run, cli.SignalsAtStart)) }
