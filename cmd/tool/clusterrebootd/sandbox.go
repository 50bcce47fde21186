package clusterrebootd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
)

// unitName is the shipped unit; drop-ins for it live in unitDropInDirs.
const unitName = "clusterrebootd.service"

// unitWritablePaths are the directories the shipped unit
// (packaging/clusterrebootd.service, ProtectSystem=strict) lets the daemon
// write: StateDirectory=, RuntimeDirectory= and ReadWritePaths=. Everything
// else is read-only to it. TestUnitWritablePaths keeps this list and the
// unit file in step.
func unitWritablePaths() []string {
	return []string{
		"/var/lib/clusterrebootd",           // StateDirectory=clusterrebootd
		"/run/clusterrebootd",               // RuntimeDirectory=clusterrebootd
		"/var/lib/prometheus/node-exporter", // ReadWritePaths=- (Debian's prometheus-node-exporter)
		"/var/lib/node_exporter/textfile",   // ReadWritePaths=- (the upstream examples' directory)
	}
}

// unitDropInDirs are where `systemctl edit` and administrators put drop-ins
// that may add ReadWritePaths= (relative to the file system root).
func unitDropInDirs() []string {
	return []string{"/etc/systemd/system/" + unitName + ".d", "/run/systemd/system/" + unitName + ".d"}
}

// sandboxWarnings lists each path the daemon must write (state_dir, run_dir,
// the directory of metrics.textfile) that the unit keeps read-only: the
// shipped unit's writable paths plus ReadWritePaths= of drop-ins under root.
// They are warnings, not problems: the file may serve a daemon started some
// other way.
func sandboxWarnings(cfg *config.Config, root string) []config.Problem {
	writable := append(unitWritablePaths(), dropInWritablePaths(root)...)
	type need struct{ field, path, what string }
	needs := []need{{"state_dir", cfg.StateDir, "state_dir"}, {"run_dir", cfg.RunDir, "run_dir"}}
	if cfg.Metrics.Textfile != "" {
		needs = append(needs, need{"metrics.textfile", filepath.Dir(cfg.Metrics.Textfile), "the directory of metrics.textfile"})
	}
	var out []config.Problem
	for _, n := range needs {
		if n.path == "" || !filepath.IsAbs(n.path) || underAny(n.path, writable) {
			continue
		}
		out = append(out, config.Problem{Field: n.field, Where: cfg.Where(n.field), Message: fmt.Sprintf(
			"%s %s is read-only under the shipped systemd unit (ProtectSystem=strict; writable: %s): "+
				"add ReadWritePaths=%s in a drop-in (systemctl edit %s)",
			n.what, filepath.Clean(n.path), strings.Join(unitWritablePaths(), ", "), filepath.Clean(n.path), unitName)})
	}
	return out
}

// underAny reports whether path is one of dirs or below one.
func underAny(path string, dirs []string) bool {
	p := filepath.Clean(path)
	for _, d := range dirs {
		d = filepath.Clean(d)
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// dropInWritablePaths reads ReadWritePaths= from the unit's drop-ins under
// root (*.conf, in name order; an empty assignment clears what came before,
// as systemd does). An unreadable drop-in adds nothing.
func dropInWritablePaths(root string) []string {
	var files []string
	for _, dir := range unitDropInDirs() {
		m, _ := filepath.Glob(filepath.Join(root, dir, "*.conf"))
		files = append(files, m...)
	}
	sort.Slice(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	var paths []string
	for _, f := range files {
		paths = readWritePaths(f, paths)
	}
	return paths
}

func readWritePaths(file string, paths []string) []string {
	f, err := os.Open(file)
	if err != nil {
		return paths
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) != "ReadWritePaths" {
				continue
			}
			if strings.TrimSpace(v) == "" {
				paths = nil
				continue
			}
			for _, p := range strings.Fields(v) {
				paths = append(paths, strings.TrimLeft(p, "-+"))
			}
		}
	}
	return paths
}
