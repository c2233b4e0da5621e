package syncbench

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// The checks a run must pass whatever its figures (the bench holds them
// with its targets; make test-sync-trees holds a real tree's runs to them
// and to checkTree's byte rules): every synced tree identical, and no
// fallback to the whole transfer.

// fallbackText is in the worker's log line when a sandbox's syncs go whole
// (createos/filesync.Store: "CreateOS sync moves whole files on this
// sandbox", with the reason) and when its store cannot be used ("…:
// every sync moves whole files").
const fallbackText = "moves whole files"

// fallbackReason reads a "log" notification's params: whether it is a
// fallback line, and its reason (or its message and error when it gives
// none).
func fallbackReason(params json.RawMessage) (string, bool) {
	var p rpc.LogParams
	if json.Unmarshal(params, &p) != nil || !strings.Contains(p.Message, fallbackText) {
		return "", false
	}
	if reason, ok := p.Meta["reason"].(string); ok && reason != "" {
		return reason, true
	}
	if e, ok := p.Meta["error"].(string); ok && e != "" {
		return p.Message + ": " + e, true
	}
	return p.Message, true
}

// laneOf is one lane's run, named for a verdict's detail.
type laneOf struct {
	name string // "run 2 …, auto, loopback"
	r    *laneRun
}

// lanes are every lane run of rs that was measured.
func lanes(rs []runResult) []laneOf {
	var out []laneOf
	for _, r := range rs {
		for _, m := range []struct {
			mode string
			m    modeRun
		}{{"whole", r.whole}, {"auto", r.auto}} {
			for _, h := range []struct {
				half string
				l    *laneRun
			}{{"loopback", m.m.loop}, {"throttled", m.m.throttled}} {
				if h.l != nil {
					out = append(out, laneOf{name: fmt.Sprintf("run %s, %s, %s", r.plan.name, m.mode, h.half), r: h.l})
				}
			}
		}
	}
	return out
}

// identityVerdict holds every measured lane run to identical trees: the
// sandbox's workspace after the sync in is what the host's tars hold, and
// the synced-out tree is the host's working tree, file by file (SHA-256).
func identityVerdict(rs []runResult) verdict {
	v := verdict{rule: "every synced tree identical by SHA-256: the sandbox's workspace as the host's tars, the synced-out tree as the host's", checked: true}
	ls := lanes(rs)
	if len(ls) == 0 {
		v.detail = "not measured"
		return v
	}
	var bad []string
	for _, l := range ls {
		if len(l.r.inDiff) > 0 {
			bad = append(bad, fmt.Sprintf("%s, in: %s", l.name, strings.Join(l.r.inDiff, ", ")))
		}
		if len(l.r.outDiff) > 0 {
			bad = append(bad, fmt.Sprintf("%s, out: %s", l.name, strings.Join(l.r.outDiff, ", ")))
		}
	}
	v.ok = len(bad) == 0
	v.detail = fmt.Sprintf("%d runs identical both ways", len(ls))
	if !v.ok {
		v.detail = strings.Join(bad, "; ")
	}
	return v
}

// fallbackVerdict holds the auto lanes to no fallback logged in any run.
// The driver logs a reason once a sandbox, and a sandbox whose helper
// failed moves whole from then on, so a fallback in the cold run counts:
// runs 2 and 3 are not incremental after it.
func fallbackVerdict(rs []runResult) verdict {
	v := verdict{rule: "new path: every run incremental, no fallback to the whole transfer logged", checked: true}
	var bad []string
	seen := false
	for _, l := range lanes(rs) {
		if !strings.Contains(l.name, ", auto, ") {
			continue
		}
		seen = true
		for _, reason := range l.r.fallbacks {
			bad = append(bad, fmt.Sprintf("%s: %q", l.name, reason))
		}
	}
	switch {
	case !seen:
		v.detail = "not measured"
	case len(bad) > 0:
		v.detail = strings.Join(bad, "; ")
	default:
		v.ok, v.detail = true, "none"
	}
	return v
}

// checkTree holds a real tree's runs (rs: the three runs in order, each
// with an auto lane on loopback) to make test-sync-trees' rules: trees
// identical, no fallback, the warm run's bytes each way at most warmShare
// of the whole transfer's, run 3's too once its new content (the edited
// files and the binary, which any transfer must carry in) is allowed for,
// and the worker's peak RSS. The whole transfer's bytes are not measured
// by a lane of their own: in, they are the host's two tars (what it puts,
// byte for byte); out, the bytes of the files the sync brings back (its
// tar is larger by headers and padding, so the share is a little above
// the one against a measured whole transfer).
func checkTree(rs []runResult) []verdict {
	if len(rs) != len(runs) {
		return []verdict{{rule: "the three runs", detail: fmt.Sprintf("%d runs measured", len(rs)), checked: true}}
	}
	out := []verdict{identityVerdict(rs), fallbackVerdict(rs)}
	for _, r := range rs[1:] {
		in := verdict{rule: fmt.Sprintf("run %s: in bytes at most %d%% of the host's tars", r.plan.name, warmShare), checked: true}
		allow := int64(0) // the warm run's one edit is not allowed for: it is the change the 2 % is for
		if r.plan.blobMiB > 0 {
			allow = r.newBytes
			in.rule = fmt.Sprintf("run %s: in bytes at most %d%% of the host's tars past the %s it wrote", r.plan.name, warmShare, humanBytes(allow))
		}
		o := verdict{rule: fmt.Sprintf("run %s: out bytes at most %d%% of the files synced out", r.plan.name, warmShare), checked: true}
		if a := r.auto.loop; a == nil {
			in.detail, o.detail = "not measured", "not measured"
		} else {
			in = shareOf(in, a.in.bytes(), allow, r.gitBytes+r.overlayBytes)
			o = shareOf(o, a.out.bytes(), 0, r.treeBytes)
		}
		out = append(out, in, o)
	}
	return append(out, rssVerdict(rs))
}

// shareOf keeps v when moved, less allow, is at most warmShare of whole.
func shareOf(v verdict, moved, allow, whole int64) verdict {
	past := max(0, moved-allow)
	v.ok = whole > 0 && past*100 <= whole*warmShare
	v.detail = fmt.Sprintf("%s of %s (%s)", humanBytes(moved), humanBytes(whole), percent(float64(moved), float64(whole)))
	if allow > 0 {
		v.detail += fmt.Sprintf("; %s past what it wrote (%s)", humanBytes(past), percent(float64(past), float64(whole)))
	}
	return v
}
