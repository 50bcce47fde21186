package config

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Load reads path over the defaults, then every path's-dir/config.d/*.yaml in
// lexical order over that (a drop-in replaces the keys it names; lists are
// replaced whole). A missing path is an error only when mustExist is set; a
// missing default file means "defaults only". It does not validate the
// rules, but a file that does not fit the schema is an error: a
// *ValidationError listing every such problem of every file, returned with
// the configuration as far as it could be decoded, whose Validate lists
// them again with the rule checks' (validate-config lists all at once).
func Load(path string, mustExist bool) (Config, error) {
	cfg := Default()
	data, err := readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !mustExist:
		return cfg, nil
	case errors.Is(err, fs.ErrNotExist):
		return cfg, exitcode.Errorf(exitcode.Config, "config %s: file does not exist; create it from /usr/share/doc/clusterrebootd/config.yaml or drop --config", path)
	case err != nil:
		return cfg, exitcode.Errorf(exitcode.Config, "config %s: %v", path, err)
	}
	var schema []Problem
	if err := decodeInto(&cfg, path, data); !schemaOnly(err, &schema) {
		return cfg, err
	}
	dropins, err := dropIns(filepath.Join(filepath.Dir(path), "config.d"))
	if err != nil {
		return cfg, exitcode.Errorf(exitcode.Config, "config drop-ins: %v", err)
	}
	for _, d := range dropins {
		data, err := readFile(d)
		if err != nil {
			return cfg, exitcode.Errorf(exitcode.Config, "config drop-in %s: %v", d, err)
		}
		if err := decodeInto(&cfg, d, data); !schemaOnly(err, &schema) {
			return cfg, err
		}
	}
	if len(schema) > 0 {
		return cfg, exitcode.New(exitcode.Config, &ValidationError{Source: path, Problems: schema})
	}
	return cfg, nil
}

// schemaOnly reports whether loading may go on after err: no error, or only
// problems of the schema (unknown keys, wrong types), which it appends to
// probs so that every file's are listed at once.
func schemaOnly(err error, probs *[]Problem) bool {
	var ve *ValidationError
	if err != nil && !errors.As(err, &ve) {
		return false
	}
	if ve != nil {
		*probs = append(*probs, ve.Problems...)
	}
	return true
}

// Parse decodes one YAML document over the defaults, without drop-ins and
// without validation: for configurations handed over on stdin (the daemon's
// cluster steps) and for tests. name labels messages.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	err := decodeInto(&cfg, name, data)
	return cfg, err
}
