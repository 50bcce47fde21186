package config

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/detect/detectspec"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Field is the YAML path, e.g. "windows.deny[1]".
	Field string `json:"field"`
	// Where is "file:line" when known.
	Where string `json:"where,omitempty"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Where != "" {
		return fmt.Sprintf("%s: %s: %s", p.Where, p.Field, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Field, p.Message)
}

// ValidationError lists every problem found; its message is the first one
// (one line), with a count of the rest.
type ValidationError struct {
	Source   string
	Problems []Problem
}

// FromFlags is Problem.Where for a value that a flag or a CRD_* variable
// set over the file: the message must not send the reader to the file.
const FromFlags = "a flag or CRD_* variable"

func (e *ValidationError) Error() string {
	msg := "config " + e.Source + ": " + e.Problems[0].String()
	if e.Problems[0].Where == FromFlags {
		msg = e.Problems[0].String()
	}
	if len(e.Problems) > 1 {
		msg += fmt.Sprintf(" (and %d more; see clusterrebootd validate-config)", len(e.Problems)-1)
	}
	return msg
}

// WindowValidator checks one window spec. lib/window provides the real one;
// it is passed in so that this package stays free of window logic.
type WindowValidator func(spec string) error

// validName reports whether s is 1..max characters of letters, digits, '.',
// '_' and '-' (first a letter or digit when alnumFirst). Hand-written rather
// than a package-level regexp: compiling those cost the daemon time and
// memory at every start (docs/performance.md, "Figures measured by hand").
// ValidGroup reports whether a group name is usable in a key: empty (no
// group), or letters, digits, '.', '_' and '-', at most 63 characters.
func ValidGroup(group string) bool { return group == "" || validName(group, 63, false) }

func validName(s string, max int, alnumFirst bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 && alnumFirst || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// splitHostPort checks a listen address "host:port" (host may be empty or a
// bracketed IPv6 literal) without linking package net.
func splitHostPort(s string) error {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return fmt.Errorf("missing port")
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") || (!strings.HasPrefix(host, "[") && strings.Contains(host, ":")) {
		return fmt.Errorf("an IPv6 host must be in brackets, e.g. [::1]:10190")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not 1-65535", port)
	}
	return nil
}

// checkEndpoint checks an etcd client URL, scheme://host:port with an
// optional trailing slash, and returns its scheme in lower case. The host is
// a name, an IPv4 address or a bracketed IPv6 literal. User information, a
// path, a query or a fragment are refused: etcd's client ignores them, so they
// are a mistake (credentials go in etcd_password_file). Written by hand
// rather than with net/url, whose package initialisation (net/netip) is a
// measurable share of crd-detect's start-up (docs/performance.md).
func checkEndpoint(e string) (scheme string, err error) {
	scheme, rest, ok := strings.Cut(e, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return "", fmt.Errorf("the scheme must be http:// or https://")
	}
	rest = strings.TrimSuffix(rest, "/")
	if i := strings.IndexAny(rest, "/?#@"); i >= 0 {
		return "", fmt.Errorf("unexpected %q: give only scheme, host and port", rest[i])
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 || strings.HasSuffix(rest, "]") {
		return "", fmt.Errorf("missing port")
	}
	host := rest[:i]
	if host == "" || host == "[]" {
		return "", fmt.Errorf("missing host")
	}
	if strings.ContainsAny(host, " \t%") {
		return "", fmt.Errorf("host %q contains a space, tab or %%", host)
	}
	return scheme, splitHostPort(rest)
}

// redactUserinfo hides a password written into an endpoint
// (scheme://user:password@host:port), which is refused, so that the error
// does not print it (docs/security.md: the etcd password is never printed).
func redactUserinfo(e string) string {
	scheme, rest, ok := strings.Cut(e, "://")
	// User information is only in the authority, before the path: an '@'
	// in the path is not a password's end.
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndexByte(authority, '@')
	if !ok || at < 0 {
		return e
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return e
	}
	return scheme + "://" + user + ":***" + rest[at:]
}

// Validate checks cfg; source names the file in messages. checkWindow may be
// nil (window specs are then not parsed). The schema problems Load found
// come first.
func Validate(cfg *Config, source string, checkWindow WindowValidator) error {
	v := &validator{cfg: cfg, problems: slices.Clone(cfg.problems)}
	v.check()
	v.windows(checkWindow)
	v.fleetLock(checkWindow)
	v.notifications()
	if len(v.problems) == 0 {
		return nil
	}
	return exitcode.New(exitcode.Config, &ValidationError{Source: source, Problems: v.problems})
}

type validator struct {
	cfg      *Config
	problems []Problem
}

func (v *validator) bad(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Field: field, Where: v.cfg.origin.where(field), Message: fmt.Sprintf(format, args...)})
}

func (v *validator) positive(field string, n int) {
	if n <= 0 {
		v.bad(field, "must be a positive number of seconds, got %d", n)
	}
}

// maxSeconds bounds every *_sec field: a year is longer than any interval,
// timeout or TTL of this product needs, and it keeps the durations far from
// overflowing (time.Duration ends at about 292 years; lock_ttl_sec's
// keepalive deadline and etcd's lease TTL limit of 9e9 s broke earlier), so
// a typo of a few extra digits is exit 2 rather than a node that busy-loops
// or never keeps its lock.
const maxSeconds = 366 * 24 * 3600

func (v *validator) atMostAYear(field string, n int) {
	if n > maxSeconds {
		v.bad(field, "%d is more than a year (%d s); use a shorter time", n, maxSeconds)
	}
}

// bounded checks the upper bound of every *_sec field.
func (v *validator) bounded() {
	c := v.cfg
	for _, f := range []struct {
		name string
		n    int
	}{
		{"health_timeout_sec", c.HealthTimeoutSec}, {"health_publish_interval_sec", c.HealthPublishIntervalSec},
		{"check_interval_sec", c.CheckIntervalSec}, {"backoff_min_sec", c.BackoffMinSec}, {"backoff_max_sec", c.BackoffMaxSec},
		{"lock_ttl_sec", c.LockTTLSec}, {"etcd_dial_timeout_sec", c.EtcdDialTimeoutSec},
		{"reboot_slot_ttl_sec", c.RebootSlotTTLSec}, {"settle_sec", c.SettleSec},
	} {
		v.atMostAYear(f.name, f.n)
	}
	for i, d := range c.Detectors {
		v.atMostAYear(fmt.Sprintf("reboot_required_detectors[%d].timeout_sec", i), d.TimeoutSec)
	}
	for i, h := range c.PreRebootHooks {
		v.atMostAYear(fmt.Sprintf("pre_reboot_hooks[%d].timeout_sec", i), h.TimeoutSec)
	}
	for i, h := range c.PostRebootHooks {
		v.atMostAYear(fmt.Sprintf("post_reboot_hooks[%d].timeout_sec", i), h.TimeoutSec)
	}
	for i, h := range c.AbortHooks {
		v.atMostAYear(fmt.Sprintf("abort_hooks[%d].timeout_sec", i), h.TimeoutSec)
	}
}

func (v *validator) absPath(field, p string, required bool) {
	switch {
	case p == "" && required:
		v.bad(field, "must be set to an absolute path")
	case p != "" && !filepath.IsAbs(p):
		v.bad(field, "%q is not an absolute path; write it starting with /", p)
	}
}

func (v *validator) check() {
	c := v.cfg
	if !validName(c.NodeName, 253, true) {
		v.bad("node_name", "%q is not a valid node name: use 1 to 253 letters, digits, '.', '_' or '-', starting with a letter or digit (it becomes part of etcd keys)", c.NodeName)
	}
	v.detectors()
	v.absPath("health_script", c.HealthScript, false)
	v.positive("health_timeout_sec", c.HealthTimeoutSec)
	v.positive("health_publish_interval_sec", c.HealthPublishIntervalSec)
	v.positive("check_interval_sec", c.CheckIntervalSec)
	v.positive("backoff_min_sec", c.BackoffMinSec)
	v.positive("backoff_max_sec", c.BackoffMaxSec)
	v.bounded()
	if c.BackoffMinSec > 0 && c.BackoffMaxSec < c.BackoffMinSec {
		v.bad("backoff_max_sec", "%d is below backoff_min_sec (%d); raise it or lower backoff_min_sec", c.BackoffMaxSec, c.BackoffMinSec)
	}
	v.lock()
	v.rollout()
	v.etcd()
	v.silences()
	if len(c.RebootCommand) == 0 || c.RebootCommand[0] == "" {
		v.bad("reboot_command", "must not be empty; the default is [\"/usr/bin/systemctl\", \"reboot\"]")
	} else if !filepath.IsAbs(c.RebootCommand[0]) {
		v.bad("reboot_command[0]", "%q must be an absolute path (commands run without a shell and without PATH lookup)", c.RebootCommand[0])
	}
	p := c.ClusterPolicies
	if p.MinHealthyFraction < 0 || p.MinHealthyFraction > 1 {
		v.bad("cluster_policies.min_healthy_fraction", "%v must be between 0 and 1", p.MinHealthyFraction)
	}
	if p.MinHealthyAbsolute < 0 {
		v.bad("cluster_policies.min_healthy_absolute", "%d must not be negative", p.MinHealthyAbsolute)
	}
	if p.ForbidIfOnlyFallbackLeft && len(p.FallbackNodes) == 0 {
		v.bad("cluster_policies.fallback_nodes", "is empty while forbid_if_only_fallback_left is true; list the fallback nodes or set it to false")
	}
	for i, n := range p.FallbackNodes {
		if !validName(n, 253, true) {
			v.bad(fmt.Sprintf("cluster_policies.fallback_nodes[%d]", i), "%q is not a valid node name", n)
		}
	}
	v.absPath("kill_switch_file", c.KillSwitchFile, true)
	v.absPath("state_dir", c.StateDir, true)
	v.absPath("run_dir", c.RunDir, true)
	if c.Metrics.Enabled {
		if err := splitHostPort(c.Metrics.Listen); err != nil {
			v.bad("metrics.listen", "%q is not host:port (e.g. 127.0.0.1:10190): %v", c.Metrics.Listen, err)
		}
	}
	v.absPath("metrics.textfile", c.Metrics.Textfile, false)
	if c.Metrics.Textfile != "" && !strings.HasSuffix(c.Metrics.Textfile, ".prom") {
		v.bad("metrics.textfile", "%q must end in .prom for node_exporter's textfile collector", c.Metrics.Textfile)
	}
	if c.RebootSlotTTLSec < 60 {
		v.bad("reboot_slot_ttl_sec", "%d is too short: it must cover a whole reboot (at least 60; default 1800)", c.RebootSlotTTLSec)
	}
	if c.SettleSec < 0 {
		v.bad("settle_sec", "%d must not be negative", c.SettleSec)
	}
	// After its reboot the node keeps its slot while the post-reboot hooks
	// and settle_sec run; the slot is renewed before each, but one run of
	// them all must fit in the slot's TTL, or the next node may follow one
	// that is not done.
	if post := c.postRebootSeconds(); c.RebootSlotTTLSec >= 60 && c.SettleSec >= 0 && c.SettleSec+post >= c.RebootSlotTTLSec {
		v.bad("settle_sec", "settle_sec (%d) plus the post-reboot hooks' timeouts (%d) reach reboot_slot_ttl_sec (%d): the slot would expire before the node is done; raise reboot_slot_ttl_sec",
			c.SettleSec, post, c.RebootSlotTTLSec)
	}
	if c.MaxRebootsPerDay < 1 {
		v.bad("max_reboots_per_day", "%d must be at least 1 (default 2); use the kill switch to stop reboots", c.MaxRebootsPerDay)
	}
	for i, u := range c.Gate.InactiveUnits {
		if err := ValidUnitName(u); err != nil {
			v.bad(fmt.Sprintf("gate.inactive_units[%d]", i), "%v", err)
		}
	}
	v.monitorChecks()
	v.hooks("pre_reboot_hooks", c.PreRebootHooks)
	v.hooks("post_reboot_hooks", c.PostRebootHooks)
	v.hooks("abort_hooks", c.AbortHooks)
	if len(c.AbortHooks) > 0 && len(c.PreRebootHooks) == 0 {
		v.bad("abort_hooks", "is set but pre_reboot_hooks is empty: abort hooks only undo what a pre-reboot hook started; add the pre-reboot hooks or remove abort_hooks")
	}
}

func (v *validator) detectors() {
	for _, p := range detectspec.Problems(v.cfg.Detectors) {
		v.bad(p.Field, "%s", p.Message)
	}
}

// exitCodes checks a detector's declared exit codes: 0-255, and never 126 or
// 127, which a wrapper uses for "cannot execute" and "not found" — treating
// those as an answer is how a missing needs-restarting turns into a reboot loop.
func (v *validator) lock() {
	c := v.cfg
	switch {
	case c.LockKey == "":
		v.bad("lock_key", "must not be empty (default /cluster/clusterrebootd/lock)")
	case !strings.HasPrefix(c.LockKey, "/") || strings.HasSuffix(c.LockKey, "/") || strings.ContainsAny(c.LockKey, " \t\n"):
		v.bad("lock_key", "%q must start with '/', not end with '/', and contain no spaces", c.LockKey)
	}
	if c.LockTTLSec < 5 {
		v.bad("lock_ttl_sec", "%d is too short; at least 5 (default 90)", c.LockTTLSec)
	} else if c.HealthScript != "" && c.LockTTLSec <= c.HealthTimeoutSec {
		v.bad("lock_ttl_sec", "%d must be greater than health_timeout_sec (%d): the lock must outlive the under-lock health check", c.LockTTLSec, c.HealthTimeoutSec)
	}
	v.budget("max_holders", c.MaxHolders, 1, "")
	v.budget("max_holders_total", c.MaxHoldersTotal, 0, "no fleet-wide bound beyond max_holders per group")
	if !ValidGroup(c.Group) {
		v.bad("group", "%q must be letters, digits, '.', '_' or '-' (at most 63)", c.Group)
	}
	if ns := c.EtcdNamespace; ns != "" && (!strings.HasPrefix(ns, "/") || !strings.HasSuffix(ns, "/")) {
		v.bad("etcd_namespace", "%q must start and end with '/', e.g. /prod/clusterrebootd/", ns)
	}
	if ns := c.Namespace(); c.LockKey != "" && !strings.HasPrefix(c.LockKey, ns) {
		v.bad("lock_key", "%q is outside etcd_namespace %q; with RBAC on the namespace the lock could not be taken", c.LockKey, ns)
	}
	// The lock's entries must not share a directory with the keys the
	// protocol reads as slots, records or the pause: the node's own entry
	// would count as a slot, or the records as entries ahead in line.
	if ns, key := c.Namespace(), strings.TrimSuffix(c.LockKey, "/")+"/"; c.LockKey != "" {
		for _, dir := range []string{ns + "rebooting/", ns + "nodes/", ns + "disable/", ns + "holds/", ns + "requests/", ns + "rollout/", ns + "queue/", ns + "notified/", ns + "index/"} {
			if strings.HasPrefix(key, dir) || strings.HasPrefix(dir, key) {
				v.bad("lock_key", "%q collides with %s, where the reboot slots, health records, pause, holds, reboot requests or the rollout's records live; choose a lock_key beside them, e.g. %slock", c.LockKey, strings.TrimSuffix(dir, "/"), ns)
				break
			}
		}
	}
}

func (v *validator) etcd() {
	c := v.cfg
	if len(c.EtcdEndpoints) == 0 {
		v.bad("etcd_endpoints", "is empty; list the etcd client URLs, e.g. [\"https://etcd-1:2379\"]")
	}
	for i, e := range c.EtcdEndpoints {
		f := fmt.Sprintf("etcd_endpoints[%d]", i)
		scheme, err := checkEndpoint(e)
		if err != nil {
			v.bad(f, "%q is not an http:// or https:// URL with host and port, e.g. https://etcd-1:2379: %v", redactUserinfo(e), err)
			continue
		}
		if c.EtcdTLS.Enabled && scheme != "https" {
			v.bad(f, "%q is plain http while etcd_tls.enabled is true; use https://", e)
		}
	}
	t := c.EtcdTLS
	if t.Enabled {
		v.absPath("etcd_tls.ca_file", t.CAFile, true)
		if (t.CertFile == "") != (t.KeyFile == "") {
			v.bad("etcd_tls", "cert_file and key_file go together; set both for mutual TLS or neither")
		}
		v.absPath("etcd_tls.cert_file", t.CertFile, false)
		v.secretFile("etcd_tls.key_file", t.KeyFile)
	}
	if c.EtcdUsername != "" && c.EtcdPasswordFile == "" {
		v.bad("etcd_password_file", "must be set when etcd_username is (a file with mode 0600 holding the password)")
	}
	if c.EtcdPasswordFile != "" && c.EtcdUsername == "" {
		v.bad("etcd_username", "must be set when etcd_password_file is")
	}
	v.secretFile("etcd_password_file", c.EtcdPasswordFile)
	v.positive("etcd_dial_timeout_sec", c.EtcdDialTimeoutSec)
}

// secretFile refuses a key or password file that others may read.
func (v *validator) secretFile(field, p string) {
	if p == "" {
		return
	}
	if !filepath.IsAbs(p) {
		v.bad(field, "%q is not an absolute path", p)
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		v.bad(field, "cannot read %s: %v", p, err)
		return
	}
	if fi.Mode().Perm()&0o077 != 0 {
		v.bad(field, "%s has mode %04o: group or others may read a secret; run chmod 600 %s", p, fi.Mode().Perm(), p)
	}
	if fi.Mode().IsRegular() && fi.Size() == 0 {
		v.bad(field, "%s is empty: write the secret into it", p)
	}
}

// ValidUnitName checks a systemd unit name for gate.inactive_units: what
// systemd allows in a name (letters, digits, ":", "-", "_", ".", "@" and
// "\\"), with a unit type suffix, and never a leading "-", which systemctl
// would read as an option.
func ValidUnitName(name string) error {
	const example = `such as "backup.service" or "fstrim.timer"`
	switch {
	case name == "":
		return fmt.Errorf("is empty; give a unit name %s", example)
	case len(name) > 255:
		return fmt.Errorf("%q is longer than 255 characters, which no unit name is", name[:40]+"...")
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("%q starts with \"-\"; give a unit name %s", name, example)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":-_.@\\", r)) {
			return fmt.Errorf("%q has %q, which no unit name has; give a unit name %s", name, r, example)
		}
	}
	dot := strings.LastIndex(name, ".")
	if dot <= 0 || dot == len(name)-1 {
		return fmt.Errorf("%q has no unit type suffix; write it in full, %s", name, example)
	}
	return nil
}

func (v *validator) hooks(field string, hooks []Hook) {
	for i, h := range hooks {
		f := fmt.Sprintf("%s[%d]", field, i)
		if len(h.Cmd) == 0 || h.Cmd[0] == "" {
			v.bad(f+".cmd", "must not be empty")
		} else if !filepath.IsAbs(h.Cmd[0]) {
			v.bad(f+".cmd[0]", "%q must be an absolute path", h.Cmd[0])
		}
		if h.TimeoutSec < 0 {
			v.bad(f+".timeout_sec", "%d must not be negative", h.TimeoutSec)
		}
		switch {
		case h.OnTimeout == "":
		case field != "pre_reboot_hooks":
			v.bad(f+".on_timeout", "only pre_reboot_hooks take on_timeout; remove it here")
		case h.OnTimeout != OnTimeoutAbort && h.OnTimeout != OnTimeoutContinue:
			v.bad(f+".on_timeout", "%q is not abort or continue (default abort: a timed-out hook stops the reboot)", h.OnTimeout)
		}
	}
}

func (v *validator) windows(check WindowValidator) {
	w := v.cfg.Windows
	if w.Timezone != "" {
		if _, err := time.LoadLocation(w.Timezone); err != nil {
			v.bad("windows.timezone", "%q is not a known IANA time zone (e.g. Europe/Berlin, UTC, Local)", w.Timezone)
		}
	}
	if check == nil {
		return
	}
	for i, s := range w.Deny {
		if err := check(s); err != nil {
			v.bad(fmt.Sprintf("windows.deny[%d]", i), "%v", err)
		}
	}
	for i, s := range w.Allow {
		if err := check(s); err != nil {
			v.bad(fmt.Sprintf("windows.allow[%d]", i), "%v", err)
		}
	}
}

// decodeError turns a failed decode of file path into exit code 2. A YAML
// syntax error is one line, as yaml.v3 reports it (decoding stops there). The
// errors of a document that parses but does not fit the schema (unknown
// keys, wrong types; yaml.v3 reports all of them) become one Problem each,
// with the field's path and file:line, like the rule checks, so that
// validate-config lists every one.
func decodeError(path string, data []byte, err error) error {
	te, ok := err.(*yaml.TypeError)
	if !ok {
		return exitcode.Errorf(exitcode.Config, "config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// The keys and list elements on each line.
	at := origins{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil {
		at.record(path, &doc)
	}
	onLine := map[string][]string{}
	for field, where := range at {
		onLine[where] = append(onLine[where], field)
	}
	probs := make([]Problem, 0, len(te.Errors))
	for _, e := range te.Errors {
		p := Problem{Message: e}
		if rest, ok := strings.CutPrefix(e, "line "); ok {
			if num, msg, ok := strings.Cut(rest, ": "); ok {
				p.Where, p.Message = path+":"+num, msg
			}
		}
		p.Field, p.Message = schemaMessage(p.Message, onLine[p.Where])
		probs = append(probs, p)
	}
	return exitcode.New(exitcode.Config, &ValidationError{Source: path, Problems: probs})
}

// yamlTags names yaml.v3's core tags the way the documentation does.
var yamlTags = map[string]string{"!!str": "a string", "!!int": "an integer", "!!float": "a number",
	"!!bool": "a boolean", "!!seq": "a list", "!!map": "a mapping", "!!null": "null", "!!timestamp": "a timestamp"}

// schemaMessage rewords yaml.v3's schema errors ("field x not found in type
// config.Config", "cannot unmarshal !!str `abc` into int") to say what is
// wrong and what to do, and picks the field among the paths of the keys and
// list elements on the error's line: the unknown key by its name, else the
// outermost (a value on one line with its key, as in `key: [a, b]`).
func schemaMessage(msg string, candidates []string) (field, message string) {
	slices.SortFunc(candidates, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	if len(candidates) > 0 {
		field = candidates[0]
	}
	if name, ok := strings.CutPrefix(msg, "field "); ok {
		if name, _, ok := strings.Cut(name, " not found in type "); ok {
			field = name
			for _, c := range candidates {
				if c == name || strings.HasSuffix(c, "."+name) {
					field = c
					break
				}
			}
			return field, "unknown field; check its spelling and place against docs/configuration.md (man clusterrebootd.yaml)"
		}
	}
	if rest, ok := strings.CutPrefix(msg, "cannot unmarshal "); ok {
		// "!!str `abc` into int" or "!!seq into string"
		tag, rest, _ := strings.Cut(rest, " ")
		value := ""
		if strings.HasPrefix(rest, "`") {
			if v, r, ok := strings.Cut(rest[1:], "` "); ok {
				value, rest = " "+strconvQuote(v), r
			}
		}
		want := strings.TrimPrefix(rest, "into ")
		got := yamlTags[tag]
		if got == "" {
			got = tag
		}
		return field, fmt.Sprintf("wrong type: %s%s where %s is expected; see docs/configuration.md", got, value, goTypeName(want))
	}
	return field, msg
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// goTypeName says a Go type of the schema in the documentation's words.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	}
	return "a mapping (" + t + ")"
}

// postRebootSeconds is the longest the post-reboot hooks may run together
// (a hook without timeout_sec gets 300 s, as the daemon gives it).
func (c *Config) postRebootSeconds() int {
	total := 0
	for _, h := range c.PostRebootHooks {
		if h.TimeoutSec > 0 {
			total += h.TimeoutSec
		} else {
			total += 300
		}
	}
	return total
}

// ValidNodeName reports whether name can be a node_name (it becomes part of
// etcd keys): 1 to 253 letters, digits, '.', '_' or '-', starting with a
// letter or digit.
func ValidNodeName(name string) bool { return validName(name, 253, true) }
