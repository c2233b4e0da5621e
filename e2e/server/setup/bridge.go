package setup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// setDuplexBridge turns the instance setting
// experimental.enableSandboxDuplexBridge on or off the way an operator
// does (paperclipai instance settings:experimental:update, i.e. PATCH
// /api/instance/settings/experimental, instance-admin only; a
// local_trusted instance's board is) and reads it back.
func (h *Env) SetDuplexBridge(ctx context.Context, on bool) error {
	payload := fmt.Sprintf(`{"enableSandboxDuplexBridge":%t}`, on)
	var updated map[string]any
	if err := h.PC.RunJSON(ctx, &updated, "instance", "settings:experimental:update", "--payload-json", payload); err != nil {
		return err
	}
	var got map[string]any
	if err := h.PC.RunJSON(ctx, &got, "instance", "settings:experimental"); err != nil {
		return err
	}
	if got["enableSandboxDuplexBridge"] != on || updated["enableSandboxDuplexBridge"] != on {
		return fmt.Errorf("enableSandboxDuplexBridge reads %v after setting it to %t", got["enableSandboxDuplexBridge"], on)
	}
	return nil
}

// RunLogText joins the chunks of a stored run log (NDJSON of
// {ts, stream, chunk, seq}, as GET /heartbeat-runs/<id>/log returns it).
func RunLogText(content string) string {
	var b strings.Builder
	for _, line := range strings.Split(content, "\n") {
		var rec struct {
			Chunk string `json:"chunk"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			b.WriteString(rec.Chunk)
		}
	}
	return b.String()
}
