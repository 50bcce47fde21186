package cli

import (
	"context"
	"flag"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// Dispatch runs the command of root's tree (github.com/peterbourgon/ff/v3/ffcli)
// that args name: `crd-lock serve fleetlock --listen A` runs the Exec of
// fleetlock with ["--listen", "A"]. Shared flags (SplitShared) may come
// before each subcommand's name and move behind it, so the subcommand parses
// them in its own FlagSet (its messages, CRD_* variables and exit codes):
// `crd-lock --config C status` is `crd-lock status --config C`. The first
// word that names no subcommand ends the walk, and that command's Exec gets
// the rest as it was given; a tool's root Exec is where its hidden commands
// and its "unknown subcommand" error live.
//
// `TOOL --completion bash|zsh|fish` as the first argument prints the
// completion script generated from the tree (WriteCompletion).
//
// Each command parses its own arguments (ParseSynopsis): ffcli's Parse
// would parse the root's flags in the root's FlagSet and give no place for
// the empty-value check, --version, the one-line usage errors and the JSON
// result a usage error still prints (docs/decisions.md).
func Dispatch(ctx context.Context, root *ffcli.Command, args []string, stdout io.Writer) error {
	if shell, ok := completionAsked(args); ok {
		return WriteCompletion(stdout, root, shell)
	}
	cmd := root
	for {
		shared, rest := SplitShared(args)
		if len(rest) == 0 {
			break
		}
		sub := Subcommand(cmd, rest[0])
		if sub == nil {
			break
		}
		cmd = sub
		args = append(append([]string{}, shared...), rest[1:]...)
	}
	return cmd.Exec(ctx, args)
}

// Subcommand returns the subcommand of cmd called name, or nil.
func Subcommand(cmd *ffcli.Command, name string) *ffcli.Command {
	for _, sub := range cmd.Subcommands {
		if sub.Name == name {
			return sub
		}
	}
	return nil
}

// Walk calls fn for cmd and every command below it, each with its path of
// names from the root ("crd-lock serve fleetlock" is [serve fleetlock]).
func Walk(cmd *ffcli.Command, fn func(path []string, cmd *ffcli.Command)) {
	walk(nil, cmd, fn)
}

func walk(path []string, cmd *ffcli.Command, fn func([]string, *ffcli.Command)) {
	fn(path, cmd)
	for _, sub := range cmd.Subcommands {
		walk(append(append([]string{}, path...), sub.Name), sub, fn)
	}
}

// SharedFlagSet is a FlagSet with the shared flags only: the flags of a
// root that runs nothing itself (crd-lock) and takes them before a
// subcommand's name.
func SharedFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Common
	c.Register(fs)
	return fs
}

// Choices declares the fixed set of values flag name of fs takes (--format
// json or text), for the completions. The flag's parsing is unchanged: its
// own code checks the value and says what is wrong.
func Choices(fs *flag.FlagSet, name string, values ...string) {
	if f := fs.Lookup(name); f != nil {
		if c, ok := f.Value.(choiceValue); ok {
			f.Value = c.Value
		}
		f.Value = choiceValue{Value: f.Value, choices: values}
	}
}

// ChoicesOf returns the values Choices declared for f, or nil.
func ChoicesOf(f *flag.Flag) []string {
	if c, ok := f.Value.(choiceValue); ok {
		return c.choices
	}
	return nil
}

// choiceValue is a flag.Value that knows its fixed set of values.
type choiceValue struct {
	flag.Value
	choices []string
}

// takesValue reports whether f needs a value (--key K), unlike a bool flag
// (--force).
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(boolFlag)
	return !ok || !b.IsBoolFlag()
}

// completionAsked reports whether args start with --completion SHELL (or
// --completion=SHELL) and returns SHELL.
func completionAsked(args []string) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	if shell, ok := strings.CutPrefix(args[0], "--completion="); ok {
		return shell, true
	}
	if args[0] == "--completion" {
		if len(args) < 2 {
			return "", true
		}
		return args[1], true
	}
	return "", false
}
