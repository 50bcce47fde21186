package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
)

// maxPkgsFile bounds how much of a .pkgs file is read.
const maxPkgsFile = 64 << 10

// fileDetector says "needed" when its marker file exists. When PATH.pkgs
// exists next to it (Debian's /var/run/reboot-required.pkgs), the packages
// listed there are reported.
type fileDetector struct {
	name, path string
	env        Env
}

func newFile(s detectspec.Detector, env Env) Detector {
	// Not path.Clean: ".." after a symlink means what the kernel says.
	return &fileDetector{name: s.Label(), path: s.Path, env: env}
}

func (f *fileDetector) Name() string { return f.name }
func (f *fileDetector) Type() string { return detectspec.TypeFile }

func (f *fileDetector) Detect(ctx context.Context) Result {
	start := time.Now()
	r := checkFile(f.env, f.path)
	r.Name, r.Type = f.name, detectspec.TypeFile
	r.DurationMS = since(start)
	return r
}

// checkFile is the file check, shared with the auto preset.
func checkFile(env Env, p string) Result {
	var r Result
	real, err := env.resolve(p)
	if err != nil {
		r.Err = fmt.Sprintf("cannot resolve %s: %v", env.display(p), err)
		return r
	}
	fi, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Detail = p + " absent"
		return r
	case err != nil:
		// Permission denied, a path component that is a file, an I/O error:
		// the marker may be there, so this is no answer rather than "no".
		r.Err = fmt.Sprintf("cannot check %s: %v; make it readable by the daemon's user or fix the path", env.display(p), err)
		return r
	}
	r.Required = true
	r.Detail = fmt.Sprintf("%s present since %s", p, fi.ModTime().UTC().Format(time.RFC3339))
	pkgs, err := readPkgs(env, p+".pkgs")
	switch {
	case err != nil:
		// The marker decides; the list is a courtesy.
		r.Detail += fmt.Sprintf("; %s.pkgs unreadable: %v", p, err)
	case len(pkgs) > 0:
		r.Packages = pkgs
		r.Detail += "; packages: " + strings.Join(pkgs, ", ")
	}
	return r
}

// readPkgs reads one package name per line, dropping blanks and repeats
// (each package's postinst appends its own line, often more than once).
// A missing file is no packages and no error.
func readPkgs(env Env, p string) ([]string, error) {
	real, err := env.resolve(p)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(real)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxPkgsFile))
	if err != nil {
		return nil, err
	}
	var pkgs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || seen[line] {
			continue
		}
		seen[line] = true
		pkgs = append(pkgs, line)
	}
	return pkgs, nil
}
