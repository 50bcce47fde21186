package cli

import (
	"flag"
	"io"
	"strings"
)

// SplitShared takes the shared flags (those Common.Register adds: --config,
// --format, --node, --log-level, --log-format) off the front of args, each
// as --flag VALUE or --flag=VALUE (one or two dashes), and returns them
// and the rest. It stops at the first argument that is not one of them,
// at "--", and at a shared flag whose value is missing, which then stays
// in rest for the subcommand's parser to report.
func SplitShared(args []string) (shared, rest []string) {
	names := sharedNames()
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "-" || a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		isBool, shared := names[name]
		if !shared {
			break
		}
		if hasValue || isBool {
			i++
			continue
		}
		if i+1 >= len(args) {
			break
		}
		i += 2
	}
	return args[:i:i], args[i:]
}

// sharedNames maps the names of the flags Common.Register adds to whether
// each is a bool flag (which takes no separate value), read from a
// throwaway FlagSet so that it follows Register.
func sharedNames() map[string]bool {
	fs := flag.NewFlagSet("shared", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Common
	c.Register(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(boolFlag)
		names[f.Name] = ok && b.IsBoolFlag()
	})
	return names
}
