package lock

import (
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
)

// An entry written by a newer version (a higher "v", fields this one does
// not know) is read; one this version cannot decode allows one holder, the
// safe side (docs/cluster-protocol.md, "Versions").
func TestEntryMaxHoldersAcrossVersions(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        int
	}{
		{"this version", `{"v":1,"node":"a","pid":1,"max_holders":3,"queued_at":"2026-01-01T00:00:00Z"}`, 3},
		{"before versions were numbered", `{"node":"a","pid":1,"max_holders":3}`, 3},
		{"newer, with fields this version does not know", `{"v":2,"node":"a","max_holders":3,"priority":{"class":"high"},"zone":"z1"}`, 3},
		{"newer, max_holders of another type", `{"v":2,"node":"a","max_holders":"3"}`, 1},
		{"newer, a known field of another type", `{"v":2,"node":{"name":"a"},"max_holders":3}`, 1},
		{"not JSON (etcdctl lock)", ``, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lockinfo.ParseAnnotation([]byte(tc.value)).MaxHolders; got != tc.want {
				t.Errorf("max_holders %d, want %d", got, tc.want)
			}
		})
	}
}
