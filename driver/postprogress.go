package driver

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// PostProgressFile in state_dir records which post-reboot steps are done for
// the boot being completed, so that a daemon restarted in the middle of the
// post-reboot checks does not run the post-reboot hooks again.
const PostProgressFile = "post-reboot-progress.json"

// postProgress remembers, for the reboot being completed (the marker's boot
// id) and the boot the node is in now, which post-reboot actions already
// ran, so that a retry after a failed gate or etcd step, or a restart of the
// daemon, does not run the hooks or the settle wait again.
type postProgress struct {
	// MarkerBootID is the boot id in the reboot marker: the boot the
	// reboot was requested from.
	MarkerBootID string `json:"marker_boot_id"`
	// BootID is the boot the steps ran in: another reboot runs them again.
	BootID  string `json:"boot_id"`
	Hooks   bool   `json:"hooks_done"`
	Settled bool   `json:"settled"`
}

func (p postProgress) is(markerBoot, boot string) bool {
	return p.MarkerBootID == markerBoot && p.BootID == boot
}

// readPostProgress returns the progress recorded in stateDir for this
// marker and boot, or none. A missing or unreadable file is no progress: the
// steps then run (again), which hooks must tolerate anyway.
func readPostProgress(stateDir, markerBoot, boot string) postProgress {
	fresh := postProgress{MarkerBootID: markerBoot, BootID: boot}
	b, err := os.ReadFile(filepath.Join(stateDir, PostProgressFile))
	if err != nil {
		return fresh
	}
	var p postProgress
	if json.Unmarshal(b, &p) != nil || !p.is(markerBoot, boot) {
		return fresh
	}
	return p
}

func writePostProgress(stateDir string, p postProgress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(stateDir, PostProgressFile), append(b, '\n'), 0o600)
}

func removePostProgress(stateDir string) error {
	err := os.Remove(filepath.Join(stateDir, PostProgressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
