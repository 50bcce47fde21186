// Package crddetect implements crd-detect. (stub: replaced by the real tool)
package crddetect

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of crd-detect.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "crd-detect: not implemented yet")
}
