package gate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/trust"
)

// CheckScript refuses a health script that must not run as root: it is
// missing, not a regular file, not executable, or someone other than root
// (or the user running the check) could change it or any directory, link or
// file on its path, as given or as resolved (lib/trust: the rules sudo and
// sshd's StrictModes apply to files they trust).
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
	if err := trust.Check(path, euid); err != nil {
		return exitcode.Errorf(exitcode.Config, "gate: health script %s: %v", name, exitcode.PathCause(err))
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
