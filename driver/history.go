package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
)

// HistoryFile is the reboot history in state_dir.
const HistoryFile = "reboot-history.json"

// LastRebootFile is written into run_dir after a coordinated reboot
// completed (FR-SD-3): the completion time, RFC 3339, one line.
const LastRebootFile = "last-reboot"

// History is the node's record of its coordinated reboots, kept in
// state_dir so that it survives them. It stops reboot loops: more than
// max_reboots_per_day reboots within 24 hours, or a node that still needs a
// reboot right after one, set Block, and the node stays blocked with reason
// reboot_loop until an operator clears it (`clusterrebootd resume --local`,
// or deleting the file).
type History struct {
	// Reboots lists the coordinated reboots, oldest first.
	Reboots []HistoryEntry `json:"reboots"`
	// Block is set while the node is blocked with reason reboot_loop.
	Block *LoopBlock `json:"block,omitempty"`
}

// HistoryEntry is one reboot.
type HistoryEntry struct {
	// At is when the reboot was requested (the marker's time).
	At time.Time `json:"at"`
	// BootID is the boot the reboot left (the marker's boot id); it
	// identifies the entry so that a restart of the daemon does not count
	// a reboot twice.
	BootID string `json:"boot_id"`
	// Rebooted is false for a reboot command that returned without the
	// machine rebooting.
	Rebooted bool `json:"rebooted"`
}

// LoopBlock says why and since when the node is blocked.
type LoopBlock struct {
	Since  time.Time `json:"since"`
	Detail string    `json:"detail"`
}

// HistoryPath is the history's path in stateDir.
func HistoryPath(stateDir string) string { return filepath.Join(stateDir, HistoryFile) }

// ReadHistory reads the history; a missing file is an empty history.
func ReadHistory(stateDir string) (History, error) {
	var h History
	data, err := os.ReadFile(HistoryPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("driver: read reboot history: %w", err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("driver: reboot history %s is not valid JSON (%v); fix or delete it", HistoryPath(stateDir), err)
	}
	return h, nil
}

// WriteHistory stores h atomically (temporary file, fsync, rename).
func WriteHistory(stateDir string, h History) error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(HistoryPath(stateDir), append(data, '\n'), 0o644)
}

// Add records a reboot unless one from the same boot is already there. It
// drops earlier entries older than 7 days, and beyond 100 entries the oldest
// ones — but never one of the last 24 hours: those are what
// max_reboots_per_day counts, whatever its value.
func (h *History) Add(e HistoryEntry, now time.Time) bool {
	for _, old := range h.Reboots {
		if old.BootID == e.BootID && old.At.Equal(e.At) {
			return false
		}
	}
	keep := h.Reboots[:0]
	for _, old := range h.Reboots {
		if now.Sub(old.At) <= 7*24*time.Hour {
			keep = append(keep, old)
		}
	}
	keep = append(keep, e)
	for len(keep) > 100 && now.Sub(keep[0].At) >= 24*time.Hour {
		keep = keep[1:]
	}
	h.Reboots = keep
	return true
}

// InLastDay counts the reboots of the 24 hours before now.
func (h History) InLastDay(now time.Time) int {
	n := 0
	for _, e := range h.Reboots {
		if d := now.Sub(e.At); d >= 0 && d < 24*time.Hour {
			n++
		}
	}
	return n
}

// WriteFileAtomic creates path's directory (0750) when missing and writes
// data to path atomically and durably (lib/atomicfile).
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("driver: write %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	return nil
}
