package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/silence/matcher"
)

// Silences configures the Alertmanager silence a node creates while it
// reboots (lib/silence; docs/silences.md): created when it takes its reboot
// slot, ending no later than the slot's lease, expired once the slot is
// freed after the post-boot checks.
type Silences struct {
	// AlertmanagerURL lists the Alertmanagers (one URL or a list); each
	// gets the silence. Empty: no silences.
	AlertmanagerURL URLList `yaml:"alertmanager_url" json:"alertmanager_url"`
	// Matchers are Alertmanager matchers, each a text/template with .Node,
	// .Group and .Lock, e.g. instance=~"{{.Node}}(:[0-9]+)?".
	Matchers []string `yaml:"matchers" json:"matchers"`
	// Required: a silence that cannot be created stops the reboot (the
	// slot is freed). Default false: logged and counted, the reboot goes on.
	Required bool `yaml:"required" json:"required"`
	// TimeoutSec bounds each request to an Alertmanager.
	TimeoutSec int `yaml:"timeout_sec" json:"timeout_sec"`
	// CreatedBy is the silence's createdBy (default clusterrebootd@<node>).
	CreatedBy string `yaml:"created_by" json:"created_by"`
}

// Enabled reports whether silences are configured.
func (s Silences) Enabled() bool { return len(s.AlertmanagerURL) > 0 }

// CreatedByFor is created_by, or clusterrebootd@node.
func (s Silences) CreatedByFor(node string) string {
	if s.CreatedBy != "" {
		return s.CreatedBy
	}
	return "clusterrebootd@" + node
}

// URLList is one URL or a list of them in YAML.
type URLList []string

// UnmarshalYAML accepts a single string as a list of one.
func (l *URLList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!null" {
			*l = nil
			return nil
		}
		*l = URLList{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// RedactURL hides the password of scheme://user:password@host…, for every
// message and log line that names an Alertmanager (or any URL).
func RedactURL(u string) string { return redactUserinfo(u) }

// checkHTTPURL checks an http:// or https:// URL with a host, an optional
// port, user information and path prefix, no fragment, and a query only
// when query is true (a webhook's token; a base URL has none). Written by
// hand for the reason checkEndpoint is.
func checkHTTPURL(u string, query bool) error {
	scheme, rest, ok := strings.Cut(u, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return fmt.Errorf("the scheme must be http:// or https://")
	}
	if query {
		if strings.ContainsAny(rest, "# \t\n") {
			return fmt.Errorf("no fragment or white space")
		}
	} else if strings.ContainsAny(rest, "?# \t\n") {
		return fmt.Errorf("no query, fragment or space: give scheme, host, optional port and path prefix")
	}
	hostport := hostPart(rest)
	if at := strings.LastIndexByte(hostport, '@'); at >= 0 {
		hostport = hostport[at+1:]
	}
	if hostport == "" || strings.HasPrefix(hostport, ":") || hostport == "[]" {
		return fmt.Errorf("missing host")
	}
	if strings.HasSuffix(hostport, "]") || !strings.Contains(hostport, ":") ||
		(strings.HasPrefix(hostport, "[") && !strings.Contains(hostport, "]:")) {
		return nil // no port: the scheme's
	}
	return splitHostPort(hostport)
}

// silences checks the silences section: URLs, and every matcher template
// rendered for this node (or a sample one) and parsed as Alertmanager would.
func (v *validator) silences() {
	s := v.cfg.Silences
	if !s.Enabled() {
		if len(s.Matchers) > 0 || s.Required {
			v.bad("silences.alertmanager_url", "is empty while silences.matchers or silences.required is set: name the Alertmanager(s), e.g. http://127.0.0.1:9093")
		}
		return
	}
	seen := map[string]bool{}
	for i, u := range s.AlertmanagerURL {
		f := fmt.Sprintf("silences.alertmanager_url[%d]", i)
		if len(s.AlertmanagerURL) == 1 {
			f = "silences.alertmanager_url"
		}
		if err := checkHTTPURL(u, false); err != nil {
			v.bad(f, "%q is not an Alertmanager URL such as http://alertmanager:9093: %v", RedactURL(u), err)
		}
		key := strings.TrimSuffix(u, "/")
		if seen[key] {
			v.bad(f, "%q is listed twice", RedactURL(u))
		}
		seen[key] = true
	}
	v.positive("silences.timeout_sec", s.TimeoutSec)
	if s.TimeoutSec > 300 {
		v.bad("silences.timeout_sec", "%d is too long: a silence request must not hold up a reboot for minutes (at most 300; default 10)", s.TimeoutSec)
	}
	if len(s.Matchers) == 0 {
		v.bad("silences.matchers", "is empty: name the alerts to silence while this node reboots, e.g. - 'instance=~\"{{.Node}}(:[0-9]+)?\"'")
		return
	}
	node := v.cfg.NodeName
	if node == "" {
		node = "node-1"
	}
	d := matcher.Data{Node: node, Group: v.cfg.Group, Lock: strings.TrimSuffix(v.cfg.LockKey, "/")}
	ok := true
	for i, m := range s.Matchers {
		if _, err := matcher.RenderOne(m, d); err != nil {
			v.bad(fmt.Sprintf("silences.matchers[%d]", i), "%v (rendered for node %s); see docs/silences.md", err, node)
			ok = false
		}
	}
	if ok {
		if _, err := matcher.Render(s.Matchers, d); err != nil {
			v.bad("silences.matchers", "%v", err)
		}
	}
}
