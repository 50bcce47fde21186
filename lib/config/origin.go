package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// origins maps a field path such as "windows.deny[1]" to "file:line", for
// the last file that set it.
type origins map[string]string

// record walks a decoded YAML document and remembers where each key and list
// element came from.
func (o origins) record(file string, n *yaml.Node) {
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			o.record(file, c)
		}
		return
	}
	o.walk(file, "", n)
}

func (o origins) walk(file, path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			// A drop-in that replaces a list replaces its elements' origins too.
			o.forget(p)
			o[p] = fmt.Sprintf("%s:%d", file, k.Line)
			o.walk(file, p, v)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			o[p] = fmt.Sprintf("%s:%d", file, c.Line)
			o.walk(file, p, c)
		}
	}
}

func (o origins) forget(prefix string) {
	for k := range o {
		if strings.HasPrefix(k, prefix+"[") || strings.HasPrefix(k, prefix+".") {
			delete(o, k)
		}
	}
}

// where returns "file:line" for path or its closest recorded parent.
func (o origins) where(path string) string {
	for p := path; p != ""; {
		if w, ok := o[p]; ok {
			return w
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}
