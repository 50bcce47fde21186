package fleetlock

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// client speaks the protocol as its text says (docs/development/fleetlock/
// protocol.md in coreos/zincati): POST, the fleet-lock-protocol header, the
// client_params body, 200 or an error object {"kind","value"}.
type client struct {
	t    testing.TB
	base string
	// style is how the endpoint is joined to base: "zincati" resolves
	// "v1/..." against a base URL ending in "/"; "flatcar" joins base and
	// "/v1/..." with "/", which gives "//v1/...".
	style string
	http  *http.Client
}

// reply is a server's answer.
type reply struct {
	Status int
	Kind   string
	Value  string
	Result Result
}

func newTestClient(t testing.TB, base, style string) client {
	// Zincati's own HTTP timeout is long (the server may queue the request).
	return client{t: t, base: base, style: style, http: &http.Client{Timeout: 30 * time.Minute}}
}

func (c client) endpoint(op string) string {
	switch c.style {
	case "flatcar":
		return strings.TrimSuffix(c.base, "/") + "/" + "/v1/" + op
	default:
		b, err := url.Parse(strings.TrimSuffix(c.base, "/") + "/")
		if err != nil {
			c.t.Fatal(err)
		}
		return b.ResolveReference(&url.URL{Path: "v1/" + op}).String()
	}
}

func (c client) preReboot(id, group string) reply { return c.do("pre-reboot", id, group) }

func (c client) steadyState(id, group string) reply { return c.do("steady-state", id, group) }

func (c client) do(op, id, group string) reply {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"client_params": map[string]string{"id": id, "group": group}})
	return c.raw(http.MethodPost, c.endpoint(op), map[string]string{"fleet-lock-protocol": "true"}, body)
}

// raw sends one request and decodes the answer, which must be JSON whatever
// the status.
func (c client) raw(method, target string, header map[string]string, body []byte) reply {
	c.t.Helper()
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		c.t.Fatalf("%s %s: Content-Type %q, want application/json (body %s)", method, target, ct, data)
	}
	r := reply{Status: resp.StatusCode}
	var v struct {
		Kind   string `json:"kind"`
		Value  string `json:"value"`
		Result Result `json:"result"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		c.t.Fatalf("%s %s: status %d, body is not JSON: %q", method, target, resp.StatusCode, data)
	}
	r.Kind, r.Value, r.Result = v.Kind, v.Value, v.Result
	if r.Status != http.StatusOK && (r.Kind == "" || r.Value == "") {
		c.t.Fatalf("%s %s: status %d without kind and value: %s", method, target, r.Status, data)
	}
	return r
}
