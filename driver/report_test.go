package driver

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
)

// The CSV columns are the JSON fields, in the struct's order: a field added
// to the row is in both, or this fails.
func TestReportColumnsAreTheJSONFields(t *testing.T) {
	rt := reflect.TypeFor[protocol.ReportRow]()
	var fields []string
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	if !reflect.DeepEqual(fields, protocol.ReportColumns()) {
		t.Fatalf("ReportColumns %v, JSON fields %v", protocol.ReportColumns(), fields)
	}
	up, sec, yes := int64(7200), int64(95), true
	at := time.Date(2026, 12, 1, 2, 3, 4, 0, time.FixedZone("CET", 3600))
	r := protocol.ReportRow{Node: "n", Wave: 2, RebootRequired: &yes, LastReboot: &at, LastRebootSec: &sec, UptimeSec: &up, Failures: []string{"post_reboot", "slot_expired"}}
	rec := r.Record()
	if len(rec) != len(fields) {
		t.Fatalf("Record has %d fields, want %d", len(rec), len(fields))
	}
	want := map[string]string{"wave": "2", "reboot_required": "true", "last_reboot": "2026-12-01T01:03:04Z", "last_reboot_sec": "95", "uptime_sec": "7200",
		"failures": "post_reboot;slot_expired", "held": "false", "needs_reboot_since": "", "booted_at": "", "state": ""}
	for i, col := range fields {
		if w, ok := want[col]; ok && rec[i] != w {
			t.Errorf("%s = %q, want %q", col, rec[i], w)
		}
	}
}
