// Package trust decides whether a file the product runs as root (the health
// script, hooks, detector commands, the reboot command) could have been
// changed by anyone else. It follows the rules sudo and OpenSSH's
// StrictModes apply to the files they trust, applied to every component of
// the path: as given, through each symbolic link, and as resolved.
//
// A component is trusted when it is owned by root or by the effective user
// (the daemon's), and neither the world nor a group other than root (gid 0)
// can write it. A directory that others can write is accepted only with the
// sticky bit (as /tmp has), where nobody but the owner of an entry may
// rename or delete it; the entry below it must then be owned by root or the
// effective user like every other component, which is what sudo requires.
// A symbolic link counts by its owner: its own mode means nothing, but a
// link owned by someone else in a sticky directory is theirs to replace,
// and one owned by nobody is not a link the administrator made.
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symbolic links followed, as the kernel's ELOOP does.
const maxLinks = 40

// Check returns nil when nobody but root and the user euid can change what
// the absolute path names. Otherwise the error names the component, what is
// wrong and the command that fixes it. An *fs.PathError from lstat (a
// missing component, say) is returned wrapped, so errors.Is(err,
// fs.ErrNotExist) holds.
func Check(path string, euid int) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	root, err := os.Lstat("/")
	if err != nil {
		return err
	}
	if err := checkOne("/", root, euid); err != nil {
		return err
	}
	resolved := "/"
	rest := components(path)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		p := filepath.Join(resolved, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := checkOne(p, fi, euid); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(rest) > 0 && !fi.IsDir() {
				return &fs.PathError{Op: "lstat", Path: p, Err: syscall.ENOTDIR}
			}
			resolved = p
			continue
		}
		if links++; links > maxLinks {
			return &fs.PathError{Op: "readlink", Path: path, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(components(target), rest...)
	}
	return nil
}

func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// checkOne applies the rules to one component.
func checkOne(p string, fi fs.FileInfo, euid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", p)
	}
	mode := fi.Mode()
	kind := "file"
	switch {
	case mode&fs.ModeSymlink != 0:
		kind = "symbolic link"
	case mode.IsDir():
		kind = "directory"
	}
	if st.Uid != 0 && int(st.Uid) != euid {
		chown := "chown root "
		if kind == "symbolic link" {
			chown = "chown -h root "
		}
		return fmt.Errorf("%s %s is owned by uid %d, who could change what runs as root; %s%s", kind, p, st.Uid, chown, p)
	}
	if kind == "symbolic link" {
		return nil
	}
	sticky := mode.IsDir() && mode&fs.ModeSticky != 0
	if mode.Perm()&0o002 != 0 && !sticky {
		return fmt.Errorf("%s %s is world-writable, so any user could run code as root through it; chmod o-w %s", kind, p, p)
	}
	if mode.Perm()&0o020 != 0 && st.Gid != 0 && !sticky {
		return fmt.Errorf("%s %s is writable by group %d; chmod g-w %s (or chgrp root %s)", kind, p, st.Gid, p, p)
	}
	return nil
}

// IsUntrusted reports whether err is Check's verdict rather than a failure
// to look (a missing file, a permission error).
func IsUntrusted(err error) bool {
	var pe *fs.PathError
	return err != nil && !errors.As(err, &pe)
}

// PrivateDir checks a directory the daemon writes its state into as root:
// its path must pass Check, and the directory itself must be owned by the
// user euid and writable by nobody else, sticky or not. Otherwise another
// user could plant a symbolic link where a state file goes and have root
// write through it.
func PrivateDir(path string, euid int) error {
	if err := Check(path, euid); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !ok || int(st.Uid) != euid:
		return fmt.Errorf("directory %s is not owned by uid %d, the user running this; chown %d %s", path, euid, euid, path)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("directory %s is writable by group or others (mode %04o); chmod go-w %s", path, fi.Mode().Perm(), path)
	}
	return nil
}
