// Package monitortest starts the real monitoring servers the alert gate,
// the silences and the notifications are tested against: Debian's
// prometheus and prometheus-alertmanager, each on a free loopback port with
// its data in the test's temporary directory, stopped when the test ends.
//
// Tests only: no program imports it (lib/testonly/buildtest). The binaries are
// $CRD_TEST_PROMETHEUS and $CRD_TEST_ALERTMANAGER, by default
// /usr/bin/prometheus and /usr/bin/prometheus-alertmanager (installed by
// `make test-monitoring`, mk/monitoring.mk). A missing binary skips the test,
// or fails it when CRD_TEST_MONITORING=1, which the make target sets so that
// a machine without the servers cannot pass by skipping.
//
// The functions that take a testing.TB are for Go tests; Run* take a
// directory and return a Stop function for testscript set-ups, which have
// no testing.TB.
package monitortest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Environment variables naming the binaries and whether they are required.
const (
	EnvPrometheus   = "CRD_TEST_PROMETHEUS"
	EnvAlertmanager = "CRD_TEST_ALERTMANAGER"
	EnvRequired     = "CRD_TEST_MONITORING"
)

// Default paths: Debian 12's packages.
const (
	DefaultPrometheus   = "/usr/bin/prometheus"
	DefaultAlertmanager = "/usr/bin/prometheus-alertmanager"
)

// StartTimeout bounds how long a server may take to answer /-/ready.
const StartTimeout = 60 * time.Second

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
}

// Binary returns the path of a server binary from env (falling back to def),
// or an error naming what to install.
func Binary(env, def string) (string, error) {
	p := os.Getenv(env)
	if p == "" {
		p = def
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found (set %s or run `make test-monitoring`, which installs Debian's prometheus and prometheus-alertmanager): %v", p, env, err)
	}
	return p, nil
}

// Required reports whether a missing server fails the test instead of
// skipping it.
func Required() bool { return os.Getenv(EnvRequired) == "1" }

func binaryOrSkip(t TB, env, def string) string {
	t.Helper()
	p, err := Binary(env, def)
	if err != nil {
		if Required() {
			t.Fatalf("%s=1: %v", EnvRequired, err)
		}
		t.Skipf("%v", err)
	}
	return p
}

// Server is a running monitoring server.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// Addr is host:port.
	Addr string
	// Log is the path of the server's combined stdout and stderr.
	Log string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Stop terminates the server and waits for it; calling it again is a no-op.
func (s *Server) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Running reports whether the process is still alive.
func (s *Server) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// freePort returns a loopback port nobody listens on now. The server may
// still lose it to another process before it binds; start retries then.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr, nil
}

// start runs bin with the args args(addr) on a free port until /-/ready
// answers 200, retrying on a lost port.
func start(bin, logPath string, args func(addr string) []string) (*Server, error) {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, args(addr)...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = logf.Close()
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		s := &Server{URL: "http://" + addr, Addr: addr, Log: logPath, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(s.done) }()
		if err := s.waitReady(StartTimeout); err != nil {
			s.Stop()
			last = err
			if bytes.Contains(tail(logPath), []byte("address already in use")) {
				continue
			}
			return nil, err
		}
		return s, nil
	}
	return nil, last
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if !s.Running() {
			return fmt.Errorf("%s exited before it was ready; its log %s ends: %s", filepath.Base(s.cmd.Path), s.Log, tail(s.Log))
		}
		resp, err := client.Get(s.URL + "/-/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s after %s; its log %s ends: %s", filepath.Base(s.cmd.Path), s.URL, limit, s.Log, tail(s.Log))
}

func tail(path string) []byte {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return bytes.TrimSpace(b)
}

// AlertmanagerOptions configures an Alertmanager.
type AlertmanagerOptions struct {
	// Config is alertmanager.yml; empty: one route to a receiver that
	// sends nowhere, group_wait 0s.
	Config string
}

// DefaultAlertmanagerConfig routes every alert to a receiver without
// destinations, without waiting.
const DefaultAlertmanagerConfig = `route:
  receiver: "null"
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: "null"
`

// Alertmanager is a running prometheus-alertmanager.
type Alertmanager struct{ *Server }

// RunAlertmanager starts an Alertmanager with its data under dir (no
// clustering: the gossip port is disabled). The caller calls Stop.
func RunAlertmanager(dir string, o AlertmanagerOptions) (*Alertmanager, error) {
	bin, err := Binary(EnvAlertmanager, DefaultAlertmanager)
	if err != nil {
		return nil, err
	}
	return runAlertmanager(bin, dir, o)
}

func runAlertmanager(bin, dir string, o AlertmanagerOptions) (*Alertmanager, error) {
	if o.Config == "" {
		o.Config = DefaultAlertmanagerConfig
	}
	cfg := filepath.Join(dir, "alertmanager.yml")
	data := filepath.Join(dir, "alertmanager-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, []byte(o.Config), 0o644); err != nil {
		return nil, err
	}
	s, err := start(bin, filepath.Join(dir, "alertmanager.log"), func(addr string) []string {
		return []string{
			"--config.file=" + cfg,
			"--storage.path=" + data,
			"--web.listen-address=" + addr,
			"--cluster.listen-address=",
			"--log.level=warn",
		}
	})
	if err != nil {
		return nil, err
	}
	return &Alertmanager{s}, nil
}

// StartAlertmanager starts an Alertmanager for t and stops it when t ends.
func StartAlertmanager(t TB, o AlertmanagerOptions) *Alertmanager {
	t.Helper()
	bin := binaryOrSkip(t, EnvAlertmanager, DefaultAlertmanager)
	am, err := runAlertmanager(bin, t.TempDir(), o)
	if err != nil {
		t.Fatalf("alertmanager: %v", err)
	}
	t.Cleanup(am.Stop)
	return am
}

// Alert is an alert as Alertmanager's v2 API returns it (the fields tests
// look at).
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State       string   `json:"state"`
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// Matcher is a v2 API label matcher.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// Silence is a silence as the v2 API returns it.
type Silence struct {
	ID        string    `json:"id"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

// PostAlertE pushes one firing alert (no end time) with the given labels
// and annotations, as Prometheus would.
func (am *Alertmanager) PostAlertE(labels, annotations map[string]string) error {
	body, _ := json.Marshal([]map[string]any{{
		"labels":      labels,
		"annotations": annotations,
		"startsAt":    time.Now().UTC().Format(time.RFC3339Nano),
	}})
	return am.do(http.MethodPost, "/api/v2/alerts", body, nil)
}

// PostAlert is PostAlertE that fails t.
func (am *Alertmanager) PostAlert(t TB, labels, annotations map[string]string) {
	t.Helper()
	if err := am.PostAlertE(labels, annotations); err != nil {
		t.Fatalf("post alert: %v", err)
	}
}

// AlertsE lists all alerts Alertmanager knows (active, silenced, inhibited).
func (am *Alertmanager) AlertsE() ([]Alert, error) {
	var out []Alert
	err := am.do(http.MethodGet, "/api/v2/alerts", nil, &out)
	return out, err
}

// SilenceE creates a silence for d from now with equality matchers
// "name=value" (or "name=~regex") and returns its ID.
func (am *Alertmanager) SilenceE(d time.Duration, matchers ...string) (string, error) {
	ms := make([]Matcher, 0, len(matchers))
	for _, m := range matchers {
		if name, v, ok := strings.Cut(m, "=~"); ok {
			ms = append(ms, Matcher{Name: name, Value: v, IsRegex: true, IsEqual: true})
			continue
		}
		name, v, ok := strings.Cut(m, "=")
		if !ok {
			return "", fmt.Errorf("matcher %q: want name=value or name=~regex", m)
		}
		ms = append(ms, Matcher{Name: name, Value: v, IsEqual: true})
	}
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"matchers":  ms,
		"startsAt":  now.Format(time.RFC3339Nano),
		"endsAt":    now.Add(d).Format(time.RFC3339Nano),
		"createdBy": "monitortest",
		"comment":   "test silence",
	})
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := am.do(http.MethodPost, "/api/v2/silences", body, &out); err != nil {
		return "", err
	}
	return out.SilenceID, nil
}

// Silence is SilenceE for an hour, failing t.
func (am *Alertmanager) Silence(t TB, matchers ...string) string {
	t.Helper()
	id, err := am.SilenceE(time.Hour, matchers...)
	if err != nil {
		t.Fatalf("silence: %v", err)
	}
	return id
}

// SilencesE lists every silence (active, pending and expired).
func (am *Alertmanager) SilencesE() ([]Silence, error) {
	var out []Silence
	err := am.do(http.MethodGet, "/api/v2/silences", nil, &out)
	return out, err
}

// Silences is SilencesE failing t.
func (am *Alertmanager) Silences(t TB) []Silence {
	t.Helper()
	out, err := am.SilencesE()
	if err != nil {
		t.Fatalf("silences: %v", err)
	}
	return out
}

// WaitAlert waits until an alert named name is in Alertmanager with the
// given state ("active", "suppressed"); "" accepts any state.
func (am *Alertmanager) WaitAlert(t TB, name, state string) Alert {
	t.Helper()
	var last []Alert
	deadline := time.Now().Add(StartTimeout)
	for time.Now().Before(deadline) {
		as, err := am.AlertsE()
		if err == nil {
			last = as
			for _, a := range as {
				if a.Labels["alertname"] == name && (state == "" || a.Status.State == state) {
					return a
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("alert %q (state %q) not in Alertmanager %s after %s; alerts: %+v", name, state, am.URL, StartTimeout, last)
	return Alert{}
}

func (am *Alertmanager) do(method, path string, body []byte, out any) error {
	return doJSON(am.URL, method, path, body, out)
}

func doJSON(base, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s%s: %s: %s", method, base, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s%s: %v", method, base, path, err)
		}
	}
	return nil
}

// PrometheusOptions configures a Prometheus.
type PrometheusOptions struct {
	// Rules is the content of one rule file (groups: …); empty: none.
	Rules string
	// ScrapeTargets are host:port addresses scraped every second as job
	// "test".
	ScrapeTargets []string
	// AlertmanagerURL, when set, is where firing alerts are sent.
	AlertmanagerURL string
}

// Prometheus is a running Prometheus.
type Prometheus struct{ *Server }

// RunPrometheus starts a Prometheus with its data under dir, scraping and
// evaluating rules every second and resending alerts after one second
// (its default waits a minute). The caller calls Stop.
func RunPrometheus(dir string, o PrometheusOptions) (*Prometheus, error) {
	bin, err := Binary(EnvPrometheus, DefaultPrometheus)
	if err != nil {
		return nil, err
	}
	return runPrometheus(bin, dir, o)
}

func runPrometheus(bin, dir string, o PrometheusOptions) (*Prometheus, error) {
	cfg := filepath.Join(dir, "prometheus.yml")
	data := filepath.Join(dir, "prometheus-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
	if o.Rules != "" {
		rules := filepath.Join(dir, "rules.yml")
		if err := os.WriteFile(rules, []byte(o.Rules), 0o644); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "rule_files:\n  - %q\n", rules)
	}
	if o.AlertmanagerURL != "" {
		host := strings.TrimPrefix(strings.TrimPrefix(o.AlertmanagerURL, "http://"), "https://")
		fmt.Fprintf(&b, "alerting:\n  alertmanagers:\n    - api_version: v2\n      static_configs:\n        - targets: [%q]\n", strings.TrimSuffix(host, "/"))
	}
	if len(o.ScrapeTargets) > 0 {
		b.WriteString("scrape_configs:\n  - job_name: test\n    static_configs:\n      - targets:\n")
		for _, tg := range o.ScrapeTargets {
			fmt.Fprintf(&b, "          - %q\n", tg)
		}
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	s, err := start(bin, filepath.Join(dir, "prometheus.log"), func(addr string) []string {
		return []string{
			"--config.file=" + cfg,
			"--storage.tsdb.path=" + data,
			"--web.listen-address=" + addr,
			"--rules.alert.resend-delay=1s",
			"--log.level=warn",
		}
	})
	if err != nil {
		return nil, err
	}
	return &Prometheus{s}, nil
}

// StartPrometheus starts a Prometheus for t and stops it when t ends.
func StartPrometheus(t TB, o PrometheusOptions) *Prometheus {
	t.Helper()
	bin := binaryOrSkip(t, EnvPrometheus, DefaultPrometheus)
	p, err := runPrometheus(bin, t.TempDir(), o)
	if err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// PromAlert is an alert from Prometheus' /api/v1/alerts.
type PromAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// AlertsE lists Prometheus' pending and firing alerts.
func (p *Prometheus) AlertsE() ([]PromAlert, error) {
	var out struct {
		Data struct {
			Alerts []PromAlert `json:"alerts"`
		} `json:"data"`
	}
	err := doJSON(p.URL, http.MethodGet, "/api/v1/alerts", nil, &out)
	return out.Data.Alerts, err
}

// WaitAlert waits until Prometheus has an alert named name in state
// ("pending", "firing"; "" for either).
func (p *Prometheus) WaitAlert(t TB, name, state string) {
	t.Helper()
	if err := p.WaitAlertE(name, state, StartTimeout); err != nil {
		t.Fatalf("%v", err)
	}
}

// WaitAlertE is WaitAlert returning an error.
func (p *Prometheus) WaitAlertE(name, state string, limit time.Duration) error {
	var last []PromAlert
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		as, err := p.AlertsE()
		if err == nil {
			last = as
			for _, a := range as {
				if a.Labels["alertname"] == name && (state == "" || a.State == state) {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("alert %q (state %q) not in Prometheus %s after %s; alerts: %+v", name, state, p.URL, limit, last)
}

// Target is a scrape target serving gauges a test sets.
type Target struct {
	// Addr is host:port to scrape.
	Addr string

	srv    *http.Server
	values chan map[string]float64
}

// RunTarget serves /metrics on a free loopback port. The caller calls Stop.
func RunTarget() (*Target, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tg := &Target{Addr: l.Addr().String(), values: make(chan map[string]float64, 1)}
	tg.values <- map[string]float64{}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		v := <-tg.values
		var b strings.Builder
		for name, val := range v {
			fmt.Fprintf(&b, "# TYPE %s gauge\n%s %g\n", name, name, val)
		}
		tg.values <- v
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, b.String())
	})
	tg.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = tg.srv.Serve(l) }()
	return tg, nil
}

// NewTarget is RunTarget for t, stopped when t ends.
func NewTarget(t TB) *Target {
	t.Helper()
	tg, err := RunTarget()
	if err != nil {
		t.Fatalf("target: %v", err)
	}
	t.Cleanup(tg.Stop)
	return tg
}

// Set sets gauge name to value on the next scrape.
func (tg *Target) Set(name string, value float64) {
	v := <-tg.values
	nv := make(map[string]float64, len(v)+1)
	for k, x := range v {
		nv[k] = x
	}
	nv[name] = value
	tg.values <- nv
}

// Stop stops serving.
func (tg *Target) Stop() {
	if tg.srv != nil {
		_ = tg.srv.Close()
	}
}
