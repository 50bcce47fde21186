package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxFileSize bounds a configuration file: a --config pointing at a device
// or a runaway file is an error, not an unbounded read.
const maxFileSize = 4 << 20

// readFile is os.ReadFile for a configuration file, at most maxFileSize
// bytes. Errors are *fs.PathError, so errors.Is(err, fs.ErrNotExist) holds.
// Only a regular file is read: a FIFO would block every tool (and a reload
// of the daemon) until someone writes to it, and a device is not a
// configuration.
func readFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO does not wait for a writer; Stat then
	// refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: notRegular(st.Mode())}
	}
	if st.Size() > maxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errTooLarge}
	}
	return data, nil
}

// dropIns lists dir/*.yaml in lexical order. A missing dir means no
// drop-ins; anything else that keeps them from being read is an error whose
// text says what to do: skipping drop-ins silently could drop a setting
// that keeps this node from rebooting. So is a file in its place (as `cp
// x.yaml config.d` makes when the directory does not exist yet) and a
// drop-in named *.yml, which would otherwise be ignored without a word.
func dropIns(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("%s is not a directory: drop-ins are files named *.yaml inside a directory config.d; "+
			"make config.d a directory and move the file into it", dir)
	default:
		return nil, fmt.Errorf("%v; fix its permissions or remove it", err)
	}
	var out []string // os.ReadDir sorts by name
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".yml") {
			return nil, fmt.Errorf("%s: drop-ins must end in .yaml, so this one would not be read; rename it",
				filepath.Join(dir, name))
		}
		if ok, _ := filepath.Match("*.yaml", name); ok {
			out = append(out, filepath.Join(dir, name))
		}
	}
	return out, nil
}

var errTooLarge = errors.New("larger than 4 MiB; is this the configuration file?")

// notRegular says what a non-regular configuration path is.
func notRegular(mode fs.FileMode) error {
	kind := "not a regular file"
	switch {
	case mode.IsDir():
		kind = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	}
	return errors.New(kind + ", not a YAML file; point it at a regular file")
}
