package crddetect

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/detect"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/report"
)

// nagiosUnknown is Nagios's UNKNOWN status. In nagios mode the process exit
// status is Nagios's (0 OK, 1 WARNING, 3 UNKNOWN), not the clusterrebootd
// table, where 3 would mean health_blocked.
const nagiosUnknown = exitcode.Code(3)

// maxListedPackages bounds the packages named in one status line.
const maxListedPackages = 5

// Text renders the result for humans.
func (r *Result) Text(w io.Writer) error {
	bw := bufio.NewWriter(w)
	switch {
	case r.ExitCode == int(exitcode.OK):
		report.Line(bw, "reboot required", "yes")
	case r.ExitCode == int(exitcode.No):
		report.Line(bw, "reboot required", "no")
	default:
		report.Line(bw, "reboot required", "unknown (no answer)")
	}
	var fired, pkgs []string
	for _, d := range r.Detectors {
		if d.Required {
			fired = append(fired, d.Name)
			pkgs = append(pkgs, d.Packages...)
		}
	}
	if len(fired) > 0 {
		report.Line(bw, "fired", strings.Join(fired, ", "))
	}
	if len(pkgs) > 0 {
		report.Line(bw, "packages", strings.Join(pkgs, ", "))
	}
	for _, d := range r.Detectors {
		report.Line(bw, "detector", fmt.Sprintf("%s (%s, %d ms): %s", d.Name, d.Type, d.DurationMS, answer(d)))
	}
	if r.Error != "" {
		report.Line(bw, "error", r.Error)
	}
	report.Line(bw, "node", r.Node)
	report.Line(bw, "exit", fmt.Sprintf("%d %s", r.ExitCode, r.ExitName))
	return bw.Flush()
}

// answer is one detector's answer in words.
func answer(d detect.Result) string {
	switch {
	case d.Err != "":
		return "ERROR " + d.Err
	case d.Required:
		return "required - " + d.Detail
	default:
		return "not required - " + d.Detail
	}
}

// writeNagios prints a Nagios plugin status line with perfdata, then one
// line per detector (Nagios's long output).
func writeNagios(w io.Writer, r *Result) error {
	var status, msg string
	var required, failed int
	var fired, pkgs []string
	for _, d := range r.Detectors {
		if d.Err != "" {
			failed++
		}
		if d.Required {
			required++
			fired = append(fired, d.Name)
			pkgs = append(pkgs, d.Packages...)
		}
	}
	switch exitcode.Code(r.ExitCode) {
	case exitcode.No:
		status, msg = "OK", "no reboot required"
	case exitcode.OK:
		status, msg = "WARNING", "reboot required by "+strings.Join(fired, ", ")
		if len(pkgs) > maxListedPackages {
			pkgs = append(pkgs[:maxListedPackages:maxListedPackages], fmt.Sprintf("%d more", len(pkgs)-maxListedPackages))
		}
		if len(pkgs) > 0 {
			msg += " (packages: " + strings.Join(pkgs, ", ") + ")"
		}
	default:
		status, msg = "UNKNOWN", r.Error
	}
	var b strings.Builder
	fmt.Fprintf(&b, "REBOOT %s - %s | detectors=%d;;;0 required=%d;;;0 errors=%d;;;0 duration=%dms;;;0\n",
		status, nagiosText(msg), len(r.Detectors), required, failed, r.DurationMS)
	for _, d := range r.Detectors {
		fmt.Fprintf(&b, "%s: %s\n", nagiosText(d.Name), nagiosText(answer(d)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nagiosText keeps a message on one line and out of the perfdata.
func nagiosText(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	return strings.Join(strings.Fields(s), " ")
}

// nagiosError maps Run's error to Nagios's exit codes: not required is OK
// (0), required is WARNING (1), anything else — a detector error, a bad
// configuration, an interruption — is UNKNOWN (3). CRITICAL (2) is never
// used: a pending reboot is not an outage.
func nagiosError(err error) error {
	switch exitcode.CodeOf(err) {
	case exitcode.No:
		return nil
	case exitcode.OK:
		return exitcode.New(exitcode.Code(1), errors.New(Tool+": reboot required (Nagios WARNING)"))
	default:
		return exitcode.New(nagiosUnknown, err)
	}
}

// writeProm prints the node_exporter textfile-collector format. Its families
// are crd-detect's own (clusterrebootd_detect_* for the run,
// clusterrebootd_detector_*{detector} per detector): none shares a name with
// the daemon's exposition, so both files can sit in one textfile directory
// (node_exporter rejects a name written with two HELP texts or types).
func writeProm(w io.Writer, r *Result, now time.Time) error {
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	failed := r.ExitCode != int(exitcode.OK) && r.ExitCode != int(exitcode.No)
	var b strings.Builder
	gauge := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	gauge("clusterrebootd_detect_reboot_required", "1 when crd-detect's overall answer is that a reboot is required (exit status 0).")
	fmt.Fprintf(&b, "clusterrebootd_detect_reboot_required %d\n", b2i(r.RebootRequired))
	gauge("clusterrebootd_detect_error", "1 when the crd-detect run gave no answer (exit status other than 0 and 1).")
	fmt.Fprintf(&b, "clusterrebootd_detect_error %d\n", b2i(failed))
	if len(r.Detectors) > 0 {
		gauge("clusterrebootd_detector_reboot_required", "1 when the detector says a reboot is required.")
		for _, d := range r.Detectors {
			fmt.Fprintf(&b, "clusterrebootd_detector_reboot_required{detector=\"%s\"} %d\n", promLabel(d.Name), b2i(d.Required))
		}
		gauge("clusterrebootd_detector_error", "1 when the detector could not answer.")
		for _, d := range r.Detectors {
			fmt.Fprintf(&b, "clusterrebootd_detector_error{detector=\"%s\"} %d\n", promLabel(d.Name), b2i(d.Err != ""))
		}
		gauge("clusterrebootd_detector_duration_seconds", "How long the detector took, in seconds.")
		for _, d := range r.Detectors {
			fmt.Fprintf(&b, "clusterrebootd_detector_duration_seconds{detector=\"%s\"} %s\n", promLabel(d.Name), strconv.FormatFloat(float64(d.DurationMS)/1000, 'f', 3, 64))
		}
	}
	gauge("clusterrebootd_detect_exit_code", "Exit status of the crd-detect run that wrote these metrics (0 required, 1 not required, 2 config, 8 detector error).")
	fmt.Fprintf(&b, "clusterrebootd_detect_exit_code %d\n", r.ExitCode)
	gauge("clusterrebootd_detect_timestamp_seconds", "Unix time of the crd-detect run that wrote these metrics.")
	fmt.Fprintf(&b, "clusterrebootd_detect_timestamp_seconds %s\n", strconv.FormatFloat(float64(now.UnixMilli())/1000, 'f', 3, 64))
	_, err := io.WriteString(w, b.String())
	return err
}

// promLabel escapes a label value for the text exposition format.
func promLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
