// Package crdgate implements crd-gate. (stub: replaced by the real tool)
package crdgate

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of crd-gate.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "crd-gate: not implemented yet")
}
