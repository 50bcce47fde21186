// Package record is the file in state_dir that lists the silences a node
// created for its reboot (docs/silences.md). It links no network code, so
// the daemon's status can read it; lib/silence writes it.
package record

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

// RecordFile is where, in state_dir next to the reboot slot's claim, a node
// records the silences it created: it survives the reboot, so that the
// complete step after the boot expires exactly them.
const RecordFile = "reboot-silences.json"

// Record is the silences of one reboot.
type Record struct {
	Node         string  `json:"node"`
	Lock         string  `json:"lock"`
	SlotKey      string  `json:"slot_key"`
	FencingToken int64   `json:"fencing_token"`
	Silences     []Entry `json:"silences"`
}

// Entry is one silence on one Alertmanager.
type Entry struct {
	// Alertmanager is the URL with its password masked (never stored).
	Alertmanager string    `json:"alertmanager"`
	ID           string    `json:"id"`
	EndsAt       time.Time `json:"ends_at"`
}

// ID is the recorded silence on the Alertmanager named name ("": none).
func (r Record) ID(name string) string {
	for _, e := range r.Silences {
		if e.Alertmanager == name {
			return e.ID
		}
	}
	return ""
}

// IDs lists the recorded silence IDs.
func (r Record) IDs() []string {
	out := make([]string, 0, len(r.Silences))
	for _, e := range r.Silences {
		out = append(out, e.ID)
	}
	return out
}

// RecordPath is the record's path in stateDir.
func RecordPath(stateDir string) string { return filepath.Join(stateDir, RecordFile) }

// WriteRecord writes r atomically.
func WriteRecord(stateDir string, r Record) error {
	data, _ := json.Marshal(r)
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return fmt.Errorf("silence: state_dir %s: %w", stateDir, err)
	}
	if err := atomicfile.WriteFile(RecordPath(stateDir), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("silence: recording the silences in %s: %w", RecordPath(stateDir), err)
	}
	return nil
}

// ReadRecord reads the record; ok is false when there is none.
func ReadRecord(stateDir string) (r Record, ok bool, err error) {
	data, err := os.ReadFile(RecordPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("silence: reading %s: %w", RecordPath(stateDir), err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, false, fmt.Errorf("silence: %s is not a silence record (%v); its silences end by themselves", RecordPath(stateDir), err)
	}
	return r, true, nil
}

// RemoveRecord removes the record; a missing one is fine.
func RemoveRecord(stateDir string) error {
	if err := os.Remove(RecordPath(stateDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("silence: removing %s: %w", RecordPath(stateDir), err)
	}
	return nil
}
