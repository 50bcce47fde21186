package clusterrebootd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// overrideResult is the child's answer (protocol.OverrideResult, the JSON
// of hold, release-hold and request) as this command prints it.
type overrideResult struct{ protocol.OverrideResult }

func (r overrideResult) Text(w io.Writer) error {
	report.Line(w, "node", r.Target)
	for _, o := range []struct {
		what string
		o    *policy.Override
	}{{"held", r.Hold}, {"reboot requested", r.Request}} {
		if o.o != nil {
			report.Line(w, o.what, fmt.Sprintf("by %s since %s: %s", report.Field(o.o.By), o.o.Since.UTC().Format(time.RFC3339), report.Field(o.o.Reason)))
		}
	}
	report.Line(w, "changed", fmt.Sprint(r.Changed))
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

// overrideCmd is `hold NODE --reason T`, `release-hold NODE` and
// `request NODE --reason T`: the crd-lock step of the same name.
func overrideCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer) error {
	sub := b.sub
	node := ""
	// NODE comes first, after any shared flags moved before it
	// (`clusterrebootd --config C hold NODE` is `hold --config C NODE`).
	if shared, rest := cli.SplitShared(args); len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		node, args = rest[0], append(shared, rest[1:]...)
	}
	withReason := sub != protocol.StepReleaseHold
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	reason := b.reason
	res := overrideResult{protocol.OverrideResult{Target: node}}
	cfg, err := b.load(nil)
	res.Node = cfg.NodeName
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	if node == "" {
		return finish(stdout, b.format, &res.Header, &res, exitcode.Errorf(exitcode.Config, "clusterrebootd %s: name the node first, e.g. clusterrebootd %s node-7 --reason \"disk swap\"", sub, sub))
	}
	if withReason && strings.TrimSpace(reason) == "" {
		return finish(stdout, b.format, &res.Header, &res, exitcode.Errorf(exitcode.Config, "clusterrebootd %s: --reason is required: say why, e.g. --reason \"CHG-1234\"", sub))
	}
	if err := report.CheckField("--reason", reason); err != nil {
		return finish(stdout, b.format, &res.Header, &res, fmt.Errorf("clusterrebootd %s: %w", sub, err))
	}
	child, err := b.child(stderr, true)
	if err != nil {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	var cr protocol.OverrideResult
	code, err := child.Run(ctx, sub, protocol.OverrideArgs{Node: node, Reason: reason, Force: b.force, Now: b.now}, cfg, &cr)
	if err == nil {
		// The child's answer under this command's header.
		childErr := cr.Error
		cr.Header, cr.Target = res.Header, node
		res.OverrideResult = cr
		if code != exitcode.OK {
			err = exitcode.Errorf(code, "%s", childErr)
		}
	} else {
		err = exitcode.New(code, err)
	}
	return finish(stdout, b.format, &res.Header, &res, err)
}
