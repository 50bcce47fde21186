// Package crdlock implements crd-lock. (stub: replaced by the real tool)
package crdlock

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of crd-lock.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "crd-lock: not implemented yet")
}
