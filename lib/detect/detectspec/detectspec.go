// Package detectspec is the reboot-required detectors' configuration: the
// type of a reboot_required_detectors entry and its rules, written once.
// lib/config composes it into the configuration and reports its problems
// with file and line; lib/detect builds the detectors from it and refuses
// the first problem. It imports nothing of the product, so that every tool
// that reads the configuration links only this much of lib/detect.
package detectspec

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Types of detectors, as written in the type field of reboot_required_detectors.
const (
	TypeFile    = "file"
	TypeCommand = "command"
	TypeAuto    = "auto"
	TypeKernel  = "kernel"
	// TypeMaxUptime is needed when the node has been up more than days days.
	TypeMaxUptime = "max_uptime"
)

// Detector is one entry of reboot_required_detectors.
type Detector struct {
	// Type is file, command, auto, kernel or max_uptime.
	Type string `yaml:"type" json:"type"`
	// Name labels the detector in output; default derived from type and path/cmd.
	Name string `yaml:"name" json:"name"`
	// Path is the marker file for type file.
	Path string `yaml:"path" json:"path"`
	// Cmd is argv for type command, run without a shell.
	Cmd []string `yaml:"cmd" json:"cmd"`
	// SuccessExitCodes mean "reboot needed" (default [1]).
	SuccessExitCodes []int `yaml:"success_exit_codes" json:"success_exit_codes"`
	// NotNeededExitCodes mean "no reboot needed" (default [0]).
	NotNeededExitCodes []int `yaml:"not_needed_exit_codes" json:"not_needed_exit_codes"`
	// TimeoutSec bounds a command detector (default 30).
	TimeoutSec int `yaml:"timeout_sec" json:"timeout_sec"`
	// Days is, for type max_uptime, the uptime in days beyond which a
	// reboot is needed.
	Days int `yaml:"days" json:"days"`
}

// MaxUptimeDays bounds the days of a max_uptime detector: ten years.
const MaxUptimeDays = 3650

// AnyName is a reserved detector name: crd-detect 0.1.0 wrote its
// overall answer as the series detector="any", which queries written for
// it would mistake a detector of that name for.
const AnyName = "any"

// ExitCodes are a command detector's answers: the codes that mean "reboot
// needed" (success_exit_codes, default [1]) and "not needed"
// (not_needed_exit_codes, default [0]).
func (d Detector) ExitCodes() (needed, notNeeded []int) {
	needed, notNeeded = d.SuccessExitCodes, d.NotNeededExitCodes
	if len(needed) == 0 {
		needed = []int{1}
	}
	if len(notNeeded) == 0 {
		notNeeded = []int{0}
	}
	return needed, notNeeded
}

// Label is the detector's name in results, logs and metrics: name, else
// derived from its type and path or command (lib/detect numbers repeated
// derived labels).
func (d Detector) Label() string {
	switch {
	case d.Name != "":
		return d.Name
	case d.Type == TypeFile:
		return "file:" + d.Path
	case d.Type == TypeCommand:
		return "command:" + strings.Join(d.Cmd, " ")
	}
	return d.Type
}

// Problem is one problem of reboot_required_detectors: the field (a YAML
// path such as reboot_required_detectors[0].path) and what is wrong.
type Problem struct {
	Field, Message string
}

// String is "field: message", one line.
func (p Problem) String() string { return p.Field + ": " + p.Message }

// Problems are the problems of reboot_required_detectors, each with its
// field: the one statement of the detectors' rules. lib/config's Validate
// reports them with file and line; lib/detect.New refuses the first.
func Problems(ds []Detector) []Problem {
	var ps []Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(ds) == 0 {
		bad("reboot_required_detectors", "is empty; without a detector no reboot is ever needed — use [{type: auto}]")
	}
	names := map[string]bool{}
	for i, d := range ds {
		f := fmt.Sprintf("reboot_required_detectors[%d]", i)
		if d.TimeoutSec < 0 {
			bad(f+".timeout_sec", "%d must not be negative", d.TimeoutSec)
		}
		switch d.Type {
		case TypeFile:
			switch {
			case d.Path == "":
				bad(f+".path", "must be set to an absolute path, e.g. /var/run/reboot-required")
			case !path.IsAbs(d.Path):
				bad(f+".path", "%q is not an absolute path; write it starting with /", d.Path)
			}
			if len(d.Cmd) > 0 {
				bad(f, "type file takes path, not cmd")
			}
		case TypeCommand:
			if len(d.Cmd) == 0 || d.Cmd[0] == "" {
				bad(f+".cmd", "a command detector needs cmd, e.g. [\"/usr/bin/needs-restarting\", \"-r\"]")
			}
			if d.Path != "" {
				bad(f, "type command takes cmd, not path")
			}
			needed, notNeeded := d.ExitCodes()
			for _, list := range []struct {
				key   string
				codes []int
			}{{"success_exit_codes", needed}, {"not_needed_exit_codes", notNeeded}} {
				for _, c := range list.codes {
					switch {
					case c < 0 || c > 255:
						bad(f+"."+list.key, "%d is not an exit code (0-255)", c)
					case c == 126 || c == 127:
						bad(f+"."+list.key, "%d means the program could not be run (not executable / not found) and cannot be an answer", c)
					}
				}
			}
			for _, c := range needed {
				if slices.Contains(notNeeded, c) {
					bad(f, "exit code %d is in both success_exit_codes and not_needed_exit_codes (defaults [1] and [0])", c)
				}
			}
		case TypeAuto, TypeKernel:
			if d.Path != "" || len(d.Cmd) > 0 {
				bad(f, "type %s takes neither path nor cmd", d.Type)
			}
		case TypeMaxUptime:
			if d.Path != "" || len(d.Cmd) > 0 || d.TimeoutSec != 0 {
				bad(f, "type max_uptime takes days only, not path, cmd or timeout_sec")
			}
			if d.Days < 1 || d.Days > MaxUptimeDays {
				bad(f+".days", "%d must be from 1 to %d: the uptime in days beyond which a reboot is needed, e.g. 30", d.Days, MaxUptimeDays)
			}
		case "":
			bad(f+".type", "is missing; use file, command, auto, kernel or max_uptime")
		default:
			bad(f+".type", "%q is not a detector type; use file, command, auto, kernel or max_uptime", d.Type)
		}
		if d.Type != TypeMaxUptime && d.Days != 0 {
			bad(f+".days", "applies to type max_uptime only")
		}
		if d.Type != TypeCommand && (len(d.SuccessExitCodes) > 0 || len(d.NotNeededExitCodes) > 0) {
			bad(f, "success_exit_codes and not_needed_exit_codes apply to type command only")
		}
		if d.Name == AnyName {
			bad(f+".name", "%q is reserved for the overall answer in metrics; choose another name", d.Name)
		}
		if d.Name != "" && names[d.Name] {
			bad(f+".name", "%q is used by another detector; names must be unique", d.Name)
		}
		names[d.Label()] = true
	}
	return ps
}
