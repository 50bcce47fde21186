// Package crdwindow implements crd-window. (stub: replaced by the real tool)
package crdwindow

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of crd-window.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "crd-window: not implemented yet")
}
