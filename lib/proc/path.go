package proc

import (
	"os"
	"strings"
)

func splitList(path string) []string { return strings.Split(path, ":") }

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
