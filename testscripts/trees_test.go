package testscripts

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/clusterrebootd/clusterrebootd/lib/cli"
)

// TestOverviewNamesEveryCommand: the overview each tool's --help prints is
// written by hand; every command of its tree is in it (a new subcommand
// cannot be left out of the help), and every command can parse and run.
func TestOverviewNamesEveryCommand(t *testing.T) {
	for tool, tree := range trees {
		var help bytes.Buffer
		_ = tools[tool](context.Background(), []string{"--help"}, nil, &help, new(bytes.Buffer))
		overview := help.String()
		cli.Walk(tree(), func(path []string, cmd *ffcli.Command) {
			if len(path) == 0 {
				return
			}
			name := strings.Join(path, " ")
			t.Run(tool+" "+name, func(t *testing.T) {
				if !strings.Contains(overview, "  "+name) && !strings.Contains(overview, ", "+name) {
					t.Errorf("%q is not in %s --help:\n%s", name, tool, overview)
				}
				if cmd.FlagSet == nil || cmd.Exec == nil {
					t.Errorf("%q has no FlagSet or no Exec", name)
				}
			})
		})
	}
}
