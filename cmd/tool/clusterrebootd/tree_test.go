package clusterrebootd

import (
	"io"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// The overview --help prints is written by hand; every command of the tree
// is in it, so a new subcommand cannot be left out of the help.
func TestOverviewNamesEveryCommand(t *testing.T) {
	cli.Walk(Tree(nil, io.Discard, io.Discard), func(path []string, cmd *ffcli.Command) {
		if len(path) == 0 {
			return
		}
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(commands, "  "+name) && !strings.Contains(commands, ", "+name) {
				t.Errorf("%q is not in the overview:\n%s", name, commands)
			}
			if cmd.FlagSet == nil || cmd.Exec == nil {
				t.Errorf("%q has no FlagSet or no Exec", name)
			}
		})
	})
}
