package reboot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// maxReason bounds the kill switch reason read from the file.
const maxReason = 200

// KillSwitch reports whether the kill switch file at path is set. Its mere
// presence (any file type, any content) disables reboots; the first line of
// a readable regular file, trimmed and at most 200 bytes, is the reason.
//
// Fail safe: when the presence cannot be determined (a stat error other
// than "does not exist", such as EACCES on a parent directory), the switch
// counts as set, reason says why, and err carries the underlying error for
// logging. An empty path means no kill switch is configured: not set.
func KillSwitch(path string) (set bool, reason string, err error) {
	if path == "" {
		return false, "", nil
	}
	// Lstat: the switch is the directory entry itself. A symlink whose
	// target is missing (a typo in `ln -s`) is set, not absent.
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return true, fmt.Sprintf("cannot tell whether kill switch %s is set (%v); treating it as set", path, exitcode.PathCause(err)), err
	}
	reason = "present"
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, serr := os.Stat(path)
		if serr != nil {
			return true, fmt.Sprintf("present (a symlink whose target cannot be read: %v)", exitcode.PathCause(serr)), nil
		}
		fi = target
	}
	if fi.Mode().IsRegular() {
		if line, rerr := firstLine(path); rerr != nil {
			reason = fmt.Sprintf("present (content unreadable: %v)", exitcode.PathCause(rerr))
		} else if line != "" {
			reason = line
		}
	}
	return true, reason, nil
}

// firstLine reads the first line of path, bounded to maxReason bytes.
func firstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	// Read a little past the bound so that a long first line is cut, not
	// mistaken for a short one.
	r := bufio.NewReader(io.LimitReader(f, 4096))
	line, err := r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimSpace(line)
	if len(line) > maxReason {
		line = strings.ToValidUTF8(line[:maxReason], "") + "..."
	}
	return line, nil
}

// BootID reads the kernel's boot id from <root>/proc/sys/kernel/random/boot_id
// (root "" or "/" is the real one). It changes on every boot, which is how
// the marker tells a completed reboot from a requested one.
func BootID(root string) (string, error) {
	p := filepath.Join(rootOr(root), "proc/sys/kernel/random/boot_id")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reboot: read boot id %s: %w", p, exitcode.PathCause(err))
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("reboot: boot id %s is empty", p)
	}
	return id, nil
}

func rootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// MachineID reads /etc/machine-id under root: stable across boots, it tells
// the same machine after a reboot from another machine with the same
// node_name. "" when unreadable (containers, minimal images): identity then
// rests on the boot id alone.
func MachineID(root string) string {
	b, err := os.ReadFile(filepath.Join(rootOr(root), "etc/machine-id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
