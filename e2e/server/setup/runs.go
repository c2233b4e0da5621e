package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/wait"
)

// waitRunDone waits until the run is terminal and returns its status.
func (h *Env) WaitRunDone(ctx context.Context, runID string) (string, error) {
	var status string
	err := wait.Poll(ctx, 4*time.Minute, "run "+runID+" finished", func() (bool, error) {
		var run struct {
			Status string `json:"status"`
		}
		if err := h.PC.API(ctx, "GET", "/heartbeat-runs/"+runID, nil, &run); err != nil {
			return false, err
		}
		status = run.Status
		switch status {
		case "succeeded", "failed", "cancelled", "timed_out", "interrupted":
			return true, nil
		}
		return false, fmt.Errorf("status %s", status)
	})
	return status, err
}

// runFailure is a run's errorCode and error text.
func (h *Env) RunFailure(ctx context.Context, id string) (code, msg string, err error) {
	var run struct {
		Error     json.RawMessage `json:"error"`
		ErrorCode string          `json:"errorCode"`
	}
	err = h.PC.API(ctx, "GET", "/heartbeat-runs/"+id, nil, &run)
	return run.ErrorCode, ErrorText(run.Error), err
}

func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// wakeManually starts a run of agent as an operator's manual wakeup and
// returns its id.
func (h *Env) WakeManually(ctx context.Context, agent string) (string, error) {
	return h.WakeAgent(ctx, agent, map[string]any{"source": "on_demand", "triggerDetail": "manual"})
}

// wakeAgent wakes agent with body (POST /agents/<id>/wakeup) and returns
// the run it started.
func (h *Env) WakeAgent(ctx context.Context, agent string, body any) (string, error) {
	var run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := h.PC.API(ctx, "POST", "/agents/"+agent+"/wakeup", body, &run); err != nil {
		return "", err
	}
	if run.ID == "" {
		return "", fmt.Errorf("the wakeup of agent %s started no run (status %q)", agent, run.Status)
	}
	return run.ID, nil
}

// ErrorText is a run's stored error as text: the string it holds, else
// its JSON.
func ErrorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}
