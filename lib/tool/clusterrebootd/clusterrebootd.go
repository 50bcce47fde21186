// Package clusterrebootd implements clusterrebootd. (stub: replaced by the real tool)
package clusterrebootd

import (
	"context"
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Run is the entry point of clusterrebootd.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return exitcode.Errorf(exitcode.Internal, "clusterrebootd: not implemented yet")
}
