package detect

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxSymlinks bounds symlink hops while resolving, like the kernel's ELOOP.
const maxSymlinks = 40

// resolve maps p, an absolute path as the target system sees it, to the
// path to open on this machine. With Root "" or "/" that is p itself. Under
// another Root, symlinks are followed as the target system would follow
// them: an absolute target (/var/run -> /run) starts again at Root and ".."
// stops at Root, so nothing under Root can point outside it.
func (e Env) resolve(p string) (string, error) {
	root := filepath.Clean(e.Root)
	if e.Root == "" || root == "/" {
		return p, nil
	}
	cur := "/"
	rest := p
	hops := 0
	for rest != "" {
		var comp string
		rest = strings.TrimLeft(rest, "/")
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
		} else {
			comp, rest = rest, ""
		}
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, comp)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			// The rest does not exist (or cannot be read): the caller's
			// open or stat reports that on the joined path.
			return filepath.Join(root, path.Join(next, rest)), nil
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		if hops > maxSymlinks {
			return "", fmt.Errorf("%s under root %s: too many levels of symbolic links", p, root)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = target + "/" + rest
	}
	return filepath.Join(root, cur), nil
}

// display names a path for messages: as the target system sees it, and the
// root it was looked up under when one is set.
func (e Env) display(p string) string {
	if e.Root == "" || filepath.Clean(e.Root) == "/" {
		return p
	}
	return p + " under root " + e.Root
}
