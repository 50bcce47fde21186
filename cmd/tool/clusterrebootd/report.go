package clusterrebootd

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/cli"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// CSV is report's --format csv: a header line, then one line per node.
const CSV report.Format = "csv"

// newReportBase is the base of report, whose --format also takes csv.
func newReportBase(stdout io.Writer) *base {
	b := newBase("report", stdout, true)
	b.formats = []report.Format{CSV}
	b.fs.Lookup("format").Usage = "output `format`: json (default when stdout is not a terminal), text, or csv (a header line, then one line per node; RFC 4180)"
	cli.Choices(b.fs, "format", string(report.JSON), string(report.Text), string(CSV))
	return b
}

// reportResult is the JSON of report.
type reportResult struct {
	report.Header
	// ReadAt is when the nodes were read (null when they could not be).
	ReadAt *time.Time           `json:"read_at"`
	Nodes  []protocol.ReportRow `json:"nodes"`
}

func (r reportResult) Text(w io.Writer) error {
	fmt.Fprintf(w, "%-24s %-14s %-4s %-11s %-12s %-6s %-32s %-10s %-20s %s\n",
		"NODE", "GROUP", "WAVE", "PROGRESS", "STATE", "REBOOT", "KERNEL (RUNNING -> INSTALLED)", "UPTIME", "LAST REBOOT", "FAILURES")
	for _, n := range r.Nodes {
		required, last := "", ""
		if n.RebootRequired != nil {
			required = fmt.Sprint(*n.RebootRequired)
		}
		if n.LastReboot != nil {
			last = n.LastReboot.UTC().Format(time.RFC3339)
		}
		kernel := report.Field(n.KernelRunning)
		if n.KernelInstalled != "" && n.KernelInstalled != n.KernelRunning {
			kernel += " -> " + report.Field(n.KernelInstalled)
		}
		uptime := ""
		if n.UptimeSec != nil {
			uptime = (time.Duration(*n.UptimeSec) * time.Second).String()
		}
		fmt.Fprintf(w, "%-24s %-14s %-4d %-11s %-12s %-6s %-32s %-10s %-20s %s\n", report.Field(n.Node), groupLabel(n.Group), n.Wave, n.Progress,
			orDash(report.Field(n.State)), orDash(required), orDash(kernel), orDash(uptime), orDash(last), orDash(strings.Join(n.Failures, ",")))
	}
	if r.Error != "" {
		report.Line(w, "error", r.Error)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeCSV writes the report as RFC 4180 CSV: the header (ReportColumns),
// then one record per node, lines ending in CRLF, a field quoted when it
// holds a comma, a quote or a line break. Every value another node wrote
// is shown as text shows it (report.Field: control characters escaped, at
// most 256 bytes), and one that a spreadsheet would take for a formula
// (starting with =, +, -, @) gets a leading '.
func writeCSV(w io.Writer, nodes []protocol.ReportRow) error {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if err := cw.Write(protocol.ReportColumns()); err != nil {
		return err
	}
	for _, n := range nodes {
		rec := n.Record()
		for i, v := range rec {
			rec[i] = csvField(v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvField(v string) string {
	v = report.Field(v)
	if v != "" && strings.ContainsRune("=+-@", rune(v[0])) {
		return "'" + v
	}
	return v
}

// reportCmd is `clusterrebootd report`: every node the cluster knows, one
// row each, from the child's report step (one read of etcd, nothing
// written).
func reportCmd(ctx context.Context, b *base, args []string, stdout, stderr io.Writer) error {
	if err := b.parse(args, stdout); err != nil {
		return err
	}
	res := reportResult{Nodes: []protocol.ReportRow{}}
	cfg, err := b.load(nil)
	res.Node = cfg.NodeName
	if err == nil {
		err = runReport(ctx, b, cfg, stderr, &res)
	}
	if b.format != CSV {
		return finish(stdout, b.format, &res.Header, &res, err)
	}
	// CSV has no place for an error: nothing on stdout (no header that a
	// reader could take for an empty fleet), the one-line error on stderr
	// and the exit code.
	if err != nil {
		return err
	}
	if werr := writeCSV(stdout, res.Nodes); werr != nil {
		return exitcode.Errorf(exitcode.Internal, "clusterrebootd report: write the CSV: %w", werr)
	}
	return nil
}

func runReport(ctx context.Context, b *base, cfg config.Config, stderr io.Writer, res *reportResult) error {
	child, err := b.child(stderr, true)
	if err != nil {
		return err
	}
	var cr protocol.ReportResult
	code, err := child.Run(ctx, protocol.StepReport, nil, cfg, &cr)
	if err != nil {
		return exitcode.New(code, err)
	}
	if code != exitcode.OK {
		return exitcode.Errorf(code, "%s", cr.Error)
	}
	res.Nodes = cr.Nodes
	if !cr.ReadAt.IsZero() {
		res.ReadAt = &cr.ReadAt
	}
	return nil
}
