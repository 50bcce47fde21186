package cluster

import (
	"context"
	"fmt"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// hookName is a hook's label: its name, or field[i].
func hookName(h config.Hook, field string, i int) string {
	if h.Name != "" {
		return h.Name
	}
	return fmt.Sprintf("%s[%d]", field, i)
}

// abortHooks undoes the pre-reboot hooks after the reboot was aborted once
// one of them had started: abort_hooks in order, each once, all of them even
// when one fails. They run in a fresh context bounded by each hook's
// timeout, not in the lock's (which may be gone: undoing a drain must not
// depend on the lock that was lost). A failure is logged and reported; it
// never changes the outcome, which stays blocked.
func (c *cycleRun) abortHooks() {
	if !c.hooksStarted || len(c.cfg.AbortHooks) == 0 || c.res.Outcome != protocol.OutcomeBlocked {
		return
	}
	actx := context.WithoutCancel(c.ctx)
	env := append(c.hookEnvFor("abort"), "ABORT_REASON="+c.res.Reason)
	c.log.Warn("the reboot was aborted after the pre-reboot hooks started; running the abort hooks", "event", "abort_hooks",
		"reason", c.res.Reason, "hooks", len(c.cfg.AbortHooks))
	for i, h := range c.cfg.AbortHooks {
		name := hookName(h, "abort_hooks", i)
		timeout := h.Timeout()
		pr := c.w.runner.Run(actx, proc.Spec{Argv: h.Cmd, Env: env, Dir: "/", Timeout: timeout})
		run := protocol.AbortHookRun{Name: name, OK: pr.OK(), DurationMS: pr.Duration.Milliseconds()}
		if !run.OK {
			run.Detail = pr.Describe(timeout)
			c.log.Error("abort hook failed; what the pre-reboot hooks did may not be undone: undo it by hand", "event", "abort_hook_failed",
				"hook", name, "reason", c.res.Reason, "detail", run.Detail, "duration_ms", run.DurationMS)
		} else {
			c.log.Info("abort hook passed", "event", "abort_hook_ok", "hook", name, "duration_ms", run.DurationMS)
		}
		c.res.AbortHooks = append(c.res.AbortHooks, run)
	}
}
