package config

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Load reads path over the defaults, then every path's-dir/config.d/*.yaml in
// lexical order over that (a drop-in replaces the keys it names; lists are
// replaced whole). A missing path is an error only when mustExist is set; a
// missing default file means "defaults only". It does not validate.
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
	if err := decodeInto(&cfg, path, data); err != nil {
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
		if err := decodeInto(&cfg, d, data); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// decodeInto decodes one YAML document strictly (unknown keys and wrong types
// are errors, with the line) on top of cfg.
func decodeInto(cfg *Config, path string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return decodeError(path, data, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil {
		if cfg.origin == nil {
			cfg.origin = origins{}
		}
		cfg.origin.record(path, &doc)
	}
	cfg.sources = append(cfg.sources, path)
	return nil
}

// Parse decodes one YAML document over the defaults, without drop-ins and
// without validation: for configurations handed over on stdin (the daemon's
// cluster steps) and for tests. name labels messages.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	err := decodeInto(&cfg, name, data)
	return cfg, err
}
