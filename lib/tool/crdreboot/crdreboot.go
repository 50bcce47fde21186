// Package crdreboot implements crd-reboot. (stub: replaced by the real tool)
package crdreboot

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of crd-reboot.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "crd-reboot: not implemented yet")
}
