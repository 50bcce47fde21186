// Command floor is the physical limit a Go daemon is measured against: a
// process that only sleeps on a ticker (check_interval_sec's default, 60 s).
// Built with the same flags as the product, it is the "floor" row of
// docs/performance.md. `floor exit` returns at once: the start-to-exit floor
// of any Go program on the machine, the peer of crd-detect and crd-window.
package main

import (
	"os"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "exit" {
		return
	}
	t := time.NewTicker(time.Minute)
	for range t.C {
	}
}
