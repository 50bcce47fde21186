// Command clusterrebootd: see man clusterrebootd and lib/tool/clusterrebootd.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/clusterrebootd"
)

func main() { os.Exit(cli.MainService("clusterrebootd", clusterrebootd.Run, cli.SignalsAtStart)) }
