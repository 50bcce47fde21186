package reboot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/clusterrebootd/clusterrebootd/lib/atomicfile"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// MarkerFile is the name of the reboot marker inside state_dir.
const MarkerFile = "reboot-marker.json"

// MarkerVersion is the schema version written into every marker.
const MarkerVersion = 1

// Marker is the record written into state_dir just before the reboot
// command runs. After the next boot a boot_id different from the running
// one proves the reboot happened; the same boot_id means it did not.
type Marker struct {
	Version     int       `json:"version"`
	Node        string    `json:"node"`
	BootID      string    `json:"boot_id"`
	RequestedAt time.Time `json:"requested_at"`
	Command     []string  `json:"command"`
	// DryRun is always false in a written marker: dry runs write none.
	DryRun bool `json:"dry_run"`
	// Extra carries fields of the caller, e.g. fencing_token and lease_id
	// from the daemon's lock.
	Extra map[string]string `json:"extra,omitempty"`
}

// MarkerPath is the marker's path in stateDir.
func MarkerPath(stateDir string) string { return filepath.Join(stateDir, MarkerFile) }

// WriteMarker stores m as stateDir/reboot-marker.json atomically: a
// temporary file in the same directory is written, synced, renamed over the
// marker, and the directory is synced, so that after a crash or power loss
// the marker is either the old one or the new one, whole. stateDir is
// created (mode 0750) when missing; the marker has mode 0644.
//
// Any failure (read-only file system, disk full, state_dir is not a
// directory) is an exitcode.RebootFailed error: a node that cannot record
// its reboot must not reboot.
func WriteMarker(stateDir string, m Marker) error {
	path := MarkerPath(stateDir)
	fail := func(err error) error {
		return exitcode.Errorf(exitcode.RebootFailed, "reboot: cannot write reboot marker %s: %v; refusing to reboot: make state_dir writable (free space, fix permissions)", path, exitcode.PathCause(err))
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fail(err)
	}
	data = append(data, '\n')
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fail(err)
	}
	return nil
}

// ReadMarker reads stateDir/reboot-marker.json. A missing marker is an
// error that matches fs.ErrNotExist.
func ReadMarker(stateDir string) (Marker, error) {
	var m Marker
	path := MarkerPath(stateDir)
	data, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("reboot: read marker: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("reboot: marker %s is not valid JSON (%v); remove it", path, err)
	}
	return m, nil
}

// RemoveMarker deletes the marker; a missing one is not an error.
func RemoveMarker(stateDir string) error {
	err := os.Remove(MarkerPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reboot: remove marker: %w", err)
	}
	return syncDir(stateDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
