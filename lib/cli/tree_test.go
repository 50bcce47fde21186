package cli

import (
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// testTree is root → a, and root → serve → fleetlock; each Exec records
// which command ran with which arguments.
func testTree(got *string) *ffcli.Command {
	exec := func(name string) func(context.Context, []string) error {
		return func(_ context.Context, args []string) error {
			*got = name + ":" + strings.Join(args, " ")
			return nil
		}
	}
	return &ffcli.Command{Name: "tool", FlagSet: SharedFlagSet("tool"), Exec: exec("root"), Subcommands: []*ffcli.Command{
		{Name: "a", FlagSet: flag.NewFlagSet("tool a", flag.ContinueOnError), Exec: exec("a")},
		{Name: "serve", Exec: exec("serve"), Subcommands: []*ffcli.Command{
			{Name: "fleetlock", Exec: exec("fleetlock")},
		}},
	}}
}

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no arguments: the root", nil, "root:"},
		{"a subcommand gets the rest", []string{"a", "--x", "1"}, "a:--x 1"},
		{"shared flags first move behind the name", []string{"--config", "C", "--format=json", "a", "--x"}, "a:--config C --format=json --x"},
		{"nested, shared flags before each name", []string{"--config", "C", "serve", "--node", "n", "fleetlock", "--listen", "L"}, "fleetlock:--config C --node n --listen L"},
		{"a parent without its child's name", []string{"serve", "--help"}, "serve:--help"},
		{"an unknown word: the root with args as given", []string{"--config", "C", "bogus"}, "root:--config C bogus"},
		{"a flag that is not shared stops the move", []string{"--x", "a"}, "root:--x a"},
		{"after --, no subcommand", []string{"--", "a"}, "root:-- a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if err := Dispatch(context.Background(), testTree(&got), tc.args, io.Discard); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ran %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWalkPaths(t *testing.T) {
	var got string
	var paths []string
	Walk(testTree(&got), func(path []string, _ *ffcli.Command) { paths = append(paths, strings.Join(path, " ")) })
	if want := []string{"", "a", "serve", "serve fleetlock"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
}

// Choices keeps the flag's own parsing and its help: the value name, the
// default, and what Set accepts are those of the wrapped Value.
func TestChoicesKeepsTheFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Common
	c.Register(fs)
	Choices(fs, "format", "json", "text", "nagios")
	if got := ChoicesOf(fs.Lookup("format")); !reflect.DeepEqual(got, []string{"json", "text", "nagios"}) {
		t.Errorf("choices %q", got)
	}
	if err := Parse(fs, []string{"--format", "prom", "--log-level", "debug"}); err != nil {
		t.Fatal(err) // not a check of the value: the tool's own code does that
	}
	if c.Format != "prom" || c.LogLevel != "debug" {
		t.Errorf("format %q log-level %q", c.Format, c.LogLevel)
	}
	var help strings.Builder
	PrintFlags(&help, fs)
	if !strings.Contains(help.String(), "  --log-level LEVEL\n") || !strings.Contains(help.String(), "(default info)") {
		t.Errorf("help changed:\n%s", help.String())
	}
}
