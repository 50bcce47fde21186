package config

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// Validate checks cfg; source names the file in messages.
func Validate(cfg *Config, source string) error {
	return nil
}

// yamlMessage flattens yaml.v3's multi-line TypeError into one line.
func yamlMessage(err error) string {
	if te, ok := err.(*yaml.TypeError); ok {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
