// Command floor is the physical limit a Go daemon is measured against: a
// process that only sleeps on a ticker (check_interval_sec's default, 60 s).
// Built with the same flags as the product, it is the "floor" row of
// docs/performance.md.
package main

import "time"

func main() {
	t := time.NewTicker(time.Minute)
	for range t.C {
	}
}
