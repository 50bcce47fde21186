// A tool that lives for milliseconds: GOMAXPROCS from the CPU count, without
// reading the cgroup's CPU quota at start and re-checking it every second, and
// no names on the runtime's memory mappings. Each saves start-up work and
// changes nothing else (docs/performance.md, "Start-up of crd-detect and
// crd-window"). The Makefile builds the local tools with GOEXPERIMENT=nogreenteagc.

//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
//go:debug decoratemappings=0

// Command crd-detect: see man crd-detect and lib/tool/crddetect.
package main

import (
	"os"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	_ "github.com/clusterrebootd/clusterrebootd/lib/stackreserve" // before yaml.v3's init: see its doc
	"github.com/clusterrebootd/clusterrebootd/lib/tool/crddetect"
)

func main() { os.Exit(cli.Main("crd-detect", crddetect.Run, cli.SignalsLazy)) }
