// Command stamp writes the current time (Unix nanoseconds) to the file named
// by its argument. The handover benchmark uses it as reboot_command, so the
// time a node "rebooted" is recorded by the command itself.
package main

import (
	"os"
	"strconv"
	"time"
)

func main() {
	now := time.Now().UnixNano()
	if len(os.Args) != 2 {
		os.Stderr.WriteString("usage: stamp FILE\n")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(strconv.FormatInt(now, 10)+"\n"), 0o644); err != nil {
		os.Stderr.WriteString("stamp: " + err.Error() + "\n")
		os.Exit(1)
	}
}
