package testscripts

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestYoungerCandidateDoesNotStarveTheOlder: with max_holders 2 and one
// reboot in flight, a candidate (a daemon, a pipeline) that waits under its
// seat is not held back by a candidate that took the group's other seat
// after it: the younger counts the older, not the other way round. Before
// the candidate mark each counted the other, and both waited as long as the
// reboot in flight kept its slot (bats/e2e_failure_budget.bats "max_holders
// 2 …" failed when two daemons took the seats together).
//
// The younger seat is made to arrive while the entry point waits on the
// group's pacing, so that the order is certain; lifting the pacing must
// then admit it.
func TestYoungerCandidateDoesNotStarveTheOlder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	bin, srv, client := realAdmission(t)
	for _, via := range []string{viaDaemon, viaPipeline} {
		t.Run(via, func(t *testing.T) {
			e := newAdmissionEnv(t, bin, srv.Endpoint, client, "young-"+via, "max_holders: 2\nrollout: {min_interval_sec: 600}\n")
			e.putLease(t, "rebooting/busy", `{"v":2,"node":"busy","lock":"LOCK","group":"g","since":"2026-01-01T00:00:00Z","boot_id":"boot-busy","machine_id":"m-busy","max_holders":2}`)
			e.putLease(t, "rollout/paced/before", `{"node":"before","group":"g","since":"2026-01-01T00:00:00Z"}`)
			v := violation{rule: "min_interval", lift: func(t *testing.T, e *admissionEnv) {
				// A candidate of the same group takes the line's other seat
				// now, behind the waiting one.
				e.putLease(t, "lock/g/7000000000000002", `{"node":"young","pid":1,"candidate":true,"max_holders":2,"queued_at":"2026-01-01T00:00:00Z","v":2}`)
				time.Sleep(2 * time.Second) // the waiter counts again on the new seat
				e.del(t, "rollout/paced/before")
			}}
			switch via {
			case viaDaemon:
				cmd, _, stderr := e.start(t, "clusterrebootd", "run", "--once", "--config", e.conf, "--crd-lock", filepath.Join(e.bin, "crd-lock"), "--log-format", "json")
				e.waits(t, v, cmd, stderr)
				if strings.Contains(stderr.String(), "young(seat)") {
					t.Errorf("the older candidate counted the younger one:\n%s", stderr)
				}
			case viaPipeline:
				cmd, _, stderr := e.start(t, "crd-lock", "hold", "--reboot-slot", "--config", e.conf, "--log-format", "json", "--timeout", "60s",
					"--", "/bin/sh", "-c", "touch "+filepath.Join(e.dir, "rebooted"))
				e.waits(t, v, cmd, stderr)
			}
		})
	}
}
