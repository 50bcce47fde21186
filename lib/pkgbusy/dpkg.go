package pkgbusy

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// dpkgDir is dpkg's administrative directory.
const dpkgDir = "/var/lib/dpkg"

// transitional are the dpkg package states of a transaction that has not
// finished: what `dpkg --audit` reports. A reboot then boots a system whose
// packages are half set up (a kernel without its initramfs or boot entry).
var transitional = []string{"half-installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending"}

// dpkgInterrupted reports a dpkg transaction that stopped half-way (killed,
// power loss, a failed maintainer script) while no dpkg runs: a journal
// left in /var/lib/dpkg/updates (dpkg itself then refuses to run: "dpkg was
// interrupted, you must manually run 'dpkg --configure -a'"), or packages in
// a transitional state. While dpkg holds its lock, the lock says it all.
func dpkgInterrupted(root string) []Holder {
	var found []Holder
	updates := dpkgDir + "/updates"
	entries, err := os.ReadDir(under(root, updates))
	switch {
	case isNotExist(err):
		return nil // no dpkg here
	case err != nil:
		h := cannotTell(updates, err)
		h.Manager, h.Path = "dpkg", updates
		return []Holder{*h}
	}
	n := 0
	for _, e := range entries {
		if isJournal(e.Name()) {
			n++
		}
	}
	if n > 0 {
		found = append(found, Holder{Manager: "dpkg", Path: updates,
			Detail: fmt.Sprintf("a dpkg run was interrupted: %s holds %d journal entr%s not yet applied; run dpkg --configure -a", updates, n, plural(n, "y", "ies"))})
	}
	status := dpkgDir + "/status"
	pkgs, err := unfinished(under(root, status))
	switch {
	case isNotExist(err):
	case err != nil:
		h := cannotTell(status, err)
		h.Manager, h.Path = "dpkg", status
		found = append(found, *h)
	case len(pkgs) > 0:
		first := pkgs[0]
		detail := fmt.Sprintf("a dpkg run was interrupted: %s is %s", first[0], first[1])
		if len(pkgs) > 1 {
			detail += fmt.Sprintf(" (%d packages not fully installed; dpkg --audit lists them)", len(pkgs))
		}
		found = append(found, Holder{Manager: "dpkg", Path: status, Detail: detail + "; run dpkg --configure -a"})
	}
	return found
}

// isJournal reports a file name dpkg uses for its journal: digits only.
func isJournal(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// unfinished lists [package, state] for every package of the dpkg status
// file at path in a transitional state, in the file's order.
func unfinished(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]string
	pkg := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			pkg = ""
		case strings.HasPrefix(line, "Package: "):
			pkg = strings.TrimSpace(line[len("Package: "):])
		case strings.HasPrefix(line, "Status: "):
			// Status: WANT EFLAG STATE
			f := strings.Fields(line[len("Status: "):])
			if len(f) == 3 && isTransitional(f[2]) {
				out = append(out, [2]string{pkg, f[2]})
			}
		}
	}
	return out, sc.Err()
}

func isTransitional(state string) bool {
	for _, s := range transitional {
		if s == state {
			return true
		}
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
