package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
)

// The configuration is read with plain system calls rather than through
// os.File: the first os.File of a process sets up the runtime's network
// poller and its finalizer goroutine, which wakes another thread. That is a
// measurable share of crd-detect's and crd-window's start-up on a small VM
// (docs/performance.md), and a configuration file needs neither.

// maxFileSize bounds a configuration file: a --config pointing at a device
// or a runaway file is an error, not an unbounded read.
const maxFileSize = 4 << 20

// readFile is os.ReadFile for a configuration file, at most maxFileSize
// bytes. Errors are *fs.PathError as os.ReadFile returns them, so
// errors.Is(err, fs.ErrNotExist) holds.
func readFile(path string) ([]byte, error) {
	fd, err := open(path, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	size := 0
	if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		size = int(st.Size)
	}
	data := make([]byte, 0, size+512)
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, 4096)
		}
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
		if len(data) > maxFileSize {
			return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
		}
	}
}

// dropIns lists dir/*.yaml in lexical order. A missing dir (or a file in its
// place) means no drop-ins; any other error, such as a config.d that cannot
// be read, is returned: skipping drop-ins silently could drop a setting
// that keeps this node from rebooting.
func dropIns(dir string) ([]string, error) {
	fd, err := open(dir, syscall.O_DIRECTORY)
	if err == nil {
		defer syscall.Close(fd)
	}
	switch {
	case err == nil:
	case errorIs(err, syscall.ENOENT), errorIs(err, syscall.ENOTDIR):
		return nil, nil
	default:
		return nil, err
	}
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	var out []string
	for _, name := range names {
		if ok, _ := filepath.Match("*.yaml", name); ok {
			out = append(out, filepath.Join(dir, name))
		}
	}
	slices.Sort(out)
	return out, nil
}

var errTooLarge = errors.New("larger than 4 MiB; is this the configuration file?")

func open(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

func errorIs(err error, errno syscall.Errno) bool {
	pe, ok := err.(*fs.PathError)
	return ok && pe.Err == errno
}
