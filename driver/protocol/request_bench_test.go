package protocol

import (
	"encoding/json"
	"os"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/window"
)

// What handing the packaged configuration to a step costs each side, the
// request against the YAML it replaced (the daemon marshalled its
// configuration, the child parsed and validated it again):
//
//	go test ./driver/protocol -run - -bench . -benchmem
//
// docs/decisions.md cites the figures.
func BenchmarkHandOver(b *testing.B) {
	data, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse("config.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	cfg.NodeName = "node-a"
	args := PublishArgs{State: "idle", LastCheck: Seconds(testNow)}
	b.Run("request/daemon", func(b *testing.B) {
		for b.Loop() {
			r, err := NewRequest(StepPublish, args, &cfg)
			if err == nil {
				_, err = r.Encode()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	r, _ := NewRequest(StepPublish, args, &cfg)
	req, _ := r.Encode()
	b.Run("request/child", func(b *testing.B) {
		for b.Loop() {
			var back Request
			if err := json.Unmarshal(req, &back); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("yaml/daemon", func(b *testing.B) {
		for b.Loop() {
			if _, err := yaml.Marshal(cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	y, _ := yaml.Marshal(cfg)
	b.Run("yaml/child", func(b *testing.B) {
		for b.Loop() {
			c, err := config.Parse("stdin", y)
			if err == nil {
				err = config.Validate(&c, "stdin", window.Validate)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
