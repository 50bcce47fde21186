package report

import (
	"io"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Settler is a tool's result: a value that embeds Header (whose Settle it
// then has), or overrides Settle to adjust the header after it.
type Settler interface{ Settle(error) }

// Finish is the end of every tool's run: it settles res with err (exit
// code, its name, the one-line error), writes res to w in format f, and
// returns err. When err is nil and the result cannot be written, it returns
// that failure (exit 70, "write result: …"): a result nobody can read is no
// success.
func Finish(w io.Writer, f Format, res Settler, err error) error {
	res.Settle(err)
	if werr := Write(w, f, res); werr != nil && err == nil {
		return exitcode.Errorf(exitcode.Internal, "write result: %w", werr)
	}
	return err
}
