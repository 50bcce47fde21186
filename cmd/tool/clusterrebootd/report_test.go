package clusterrebootd

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
)

// The CSV parses as RFC 4180 (a header, one record per node, every record
// as long as the header), and a value with a comma, a quote or a line
// break comes back as it went in, a line break escaped; a value a
// spreadsheet would run as a formula does not start with its sign.
func TestReportCSV(t *testing.T) {
	yes := true
	since := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	rows := []protocol.ReportRow{
		{Node: "node-a", Progress: "waiting", State: "blocked", RebootRequired: &yes, NeedsRebootSince: &since, Reason: "window: closed, opens 02:00", Failures: []string{}},
		{Node: "node-b", Group: "db", Wave: 1, Progress: "unknown", Reason: "say \"hi\"\nthen =1+1", Failures: []string{"post_reboot", "slot_expired"}},
		{Node: "node-c", Progress: "up_to_date", Reason: "=HYPERLINK(\"http://x\")", Version: "@sum"},
	}
	var b bytes.Buffer
	if err := writeCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, strings.Join(protocol.ReportColumns(), ",")+"\r\n") || strings.Count(out, "\r\n") != 4 {
		t.Fatalf("want the header and 3 lines, each ending in CRLF:\n%q", out)
	}
	if !strings.Contains(out, `,"window: closed, opens 02:00"`) {
		t.Errorf("the reason with a comma is not quoted:\n%s", out)
	}
	r := csv.NewReader(strings.NewReader(out))
	recs, err := r.ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("does not parse as CSV (%v): %d records", err, len(recs))
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	for _, tt := range []struct {
		row       int
		col, want string
	}{
		{1, "reason", "window: closed, opens 02:00"},
		{1, "needs_reboot_since", "2026-12-01T02:00:00Z"},
		{1, "reboot_required", "true"},
		{2, "reason", `say "hi"\nthen =1+1`},
		{2, "failures", "post_reboot;slot_expired"},
		{2, "reboot_required", ""},
		{2, "wave", "1"},
		{3, "reason", `'=HYPERLINK("http://x")`},
		{3, "version", "'@sum"},
	} {
		if got := recs[tt.row][col[tt.col]]; got != tt.want {
			t.Errorf("row %d %s = %q, want %q", tt.row, tt.col, got, tt.want)
		}
	}
}

func TestReportText(t *testing.T) {
	up := int64(90061)
	var b bytes.Buffer
	res := reportResult{Nodes: []protocol.ReportRow{{Node: "node-a", Progress: "done", State: "idle", KernelRunning: "6.1.0-9-amd64", KernelInstalled: "6.1.0-28-amd64", UptimeSec: &up, Failures: []string{"post_reboot"}}}}
	if err := res.Text(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NODE", "node-a", "(ungrouped)", "done", "6.1.0-9-amd64 -> 6.1.0-28-amd64", "25h1m1s", "post_reboot"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
