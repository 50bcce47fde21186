package gate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// CheckScript refuses a health script that must not run as root: it is
// missing, not a regular file, not executable, or someone other than root
// (or the user running the check) could change it. In detail, after
// following symbolic links the script must be
//
//   - a regular file with at least one execute bit,
//   - not world-writable, and not group-writable unless its group is root (gid 0),
//   - owned by root or by the effective user,
//
// and the directory holding it must be owned by root or the effective user
// and not be writable by others or by a non-root group unless it has the
// sticky bit (in a sticky directory only the owner may replace the file).
// These are the rules sshd's StrictModes and sudo apply to files they trust.
//
// Every failure is an exitcode.Config error naming the file and what to do.
func CheckScript(path string) error {
	return checkScript(path, os.Geteuid())
}

func checkScript(path string, euid int) error {
	if path == "" {
		return exitcode.Errorf(exitcode.Config, "gate: health_script is empty; set it to an executable file")
	}
	if !filepath.IsAbs(path) {
		return exitcode.Errorf(exitcode.Config, "gate: health script %q is not an absolute path; give the full path", path)
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return exitcode.Errorf(exitcode.Config, "gate: health script %s does not exist; install it or fix health_script", path)
	}
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "gate: health script %s: %v", path, exitcode.PathCause(err))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "gate: health script %s: %v", path, exitcode.PathCause(err))
	}
	name := path
	if real != path {
		name = path + " (-> " + real + ")"
	}
	mode := fi.Mode()
	if !mode.IsRegular() {
		kind := "not a regular file"
		if mode.IsDir() {
			kind = "a directory"
		}
		return exitcode.Errorf(exitcode.Config, "gate: health script %s is %s; point health_script at an executable file", name, kind)
	}
	if mode.Perm()&0o111 == 0 {
		return exitcode.Errorf(exitcode.Config, "gate: health script %s is not executable; chmod 0755 %s", name, real)
	}
	if err := checkOwnerAndMode(fi, euid, "health script "+name, real, false); err != nil {
		return err
	}
	dir := filepath.Dir(real)
	di, err := os.Stat(dir)
	if err != nil {
		return exitcode.Errorf(exitcode.Config, "gate: directory of health script %s: %v", name, exitcode.PathCause(err))
	}
	return checkOwnerAndMode(di, euid, "directory "+dir+" of health script "+name, dir, true)
}

// checkOwnerAndMode applies the ownership and write-permission rules to a
// file or (dir set) a directory, where the sticky bit makes shared write
// permission harmless.
func checkOwnerAndMode(fi fs.FileInfo, euid int, what, path string, dir bool) error {
	perm := fi.Mode().Perm()
	sticky := dir && fi.Mode()&fs.ModeSticky != 0
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return exitcode.Errorf(exitcode.Config, "gate: %s: cannot read its owner", what)
	}
	if perm&0o002 != 0 && !sticky {
		return exitcode.Errorf(exitcode.Config, "gate: %s is world-writable, so any user could run code as root through it; chmod o-w %s", what, path)
	}
	if perm&0o020 != 0 && st.Gid != 0 && !sticky {
		return exitcode.Errorf(exitcode.Config, "gate: %s is writable by group %d; chmod g-w %s (or chgrp root %s)", what, st.Gid, path, path)
	}
	if st.Uid != 0 && int(st.Uid) != euid {
		return exitcode.Errorf(exitcode.Config, "gate: %s is owned by uid %d, who could change what runs as root; chown root %s", what, st.Uid, path)
	}
	return nil
}

// withoutPath is err without the path of the *fs.PathError inside it, which
// the message around it already names; what wraps it (proc's note on a
// missing #! interpreter) stays.
func withoutPath(err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err
	}
	return errors.New(strings.Replace(err.Error(), pe.Error(), pe.Err.Error(), 1))
}
