package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
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
// errors.Is(err, fs.ErrNotExist) holds. Only a regular file is read: a FIFO
// would block every tool (and a reload of the daemon) until someone writes
// to it, and a device is not a configuration.
func readFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO does not wait for a writer; Fstat then
	// refuses it.
	fd, err := open(path, syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &fs.PathError{Op: "read", Path: path, Err: notRegular(st.Mode)}
	}
	if st.Size > maxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
	}
	size := int(st.Size)
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

// dropIns lists dir/*.yaml in lexical order. A missing dir means no
// drop-ins; anything else that keeps them from being read is an error whose
// text says what to do: skipping drop-ins silently could drop a setting
// that keeps this node from rebooting. So is a file in its place (as `cp
// x.yaml config.d` makes when the directory does not exist yet) and a
// drop-in named *.yml, which would otherwise be ignored without a word.
func dropIns(dir string) ([]string, error) {
	fd, err := open(dir, syscall.O_DIRECTORY)
	if err == nil {
		defer syscall.Close(fd)
	}
	switch {
	case err == nil:
	case errorIs(err, syscall.ENOENT):
		return nil, nil
	case errorIs(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("%s is not a directory: drop-ins are files named *.yaml inside a directory config.d; "+
			"make config.d a directory and move the file into it", dir)
	default:
		return nil, fmt.Errorf("%v; fix its permissions or remove it", err)
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
		if strings.HasSuffix(name, ".yml") {
			return nil, fmt.Errorf("%s: drop-ins must end in .yaml, so this one would not be read; rename it",
				filepath.Join(dir, name))
		}
		if ok, _ := filepath.Match("*.yaml", name); ok {
			out = append(out, filepath.Join(dir, name))
		}
	}
	slices.Sort(out)
	return out, nil
}

var errTooLarge = errors.New("larger than 4 MiB; is this the configuration file?")

// notRegular says what a non-regular configuration path is.
func notRegular(mode uint32) error {
	kind := "not a regular file"
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		kind = "a directory"
	case syscall.S_IFIFO:
		kind = "a FIFO"
	case syscall.S_IFCHR, syscall.S_IFBLK:
		kind = "a device"
	case syscall.S_IFSOCK:
		kind = "a socket"
	}
	return errors.New(kind + ", not a YAML file; point it at a regular file")
}

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
