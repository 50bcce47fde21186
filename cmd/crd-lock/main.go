// Command crd-lock: see man crd-lock and lib/tool/crdlock.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crdlock"
)

func main() {
	// `crd-lock step` runs under the daemon and shares its stderr, the
	// journal; other commands keep the plain stream (hold hands it to its
	// command).
	if len(os.Args) > 1 && os.Args[1] == "step" {
		os.Exit(cli.MainService("crd-lock", crdlock.Run, cli.SignalsAtStart))
	}
	os.Exit(cli.Main("crd-lock", crdlock.Run, cli.SignalsAtStart))
}
