package rpctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Play sends a JSONL request script to the worker, one request at a time,
// as the golden fixtures and `make demo` do. Script lines:
//
//	# comment                      ignored (blank lines too)
//	{"jsonrpc":...}                sent as is; Play waits for its reply
//	@nowait {"jsonrpc":...}        sent without waiting for the reply
//	@wait <id>                     wait for the reply with that JSON id
//	@raw <text>                    send text as a line; wait for a reply with id null
//	@bigline <bytes>               send a valid health request padded to about <bytes>
//	@close                         close stdin and read until the worker's output ends
//
// "{{name}}" in a line is replaced by vars["name"]. Play keeps vars["lease"]
// the providerLeaseId of the latest result that had one, and
// vars["remoteCwd"] and vars["fakeRootDir"] that lease's metadata.
func (p *Peer) Play(ctx context.Context, script []byte, vars map[string]string) error {
	if vars == nil {
		vars = map[string]string{}
	}
	pl := player{p: p, vars: vars}
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := pl.step(ctx, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

type player struct {
	p    *Peer
	vars map[string]string
}

func (pl *player) step(ctx context.Context, line string) error {
	directive, arg, _ := strings.Cut(line, " ")
	switch directive {
	case "@nowait":
		return pl.send(arg, "")
	case "@wait":
		return pl.await(ctx, json.RawMessage(arg))
	case "@raw":
		return pl.sendAwait(ctx, arg, "", json.RawMessage("null"))
	case "@bigline":
		n, err := strconv.Atoi(arg)
		if err != nil {
			return fmt.Errorf("@bigline wants a byte count, not %q", arg)
		}
		const req = `{"jsonrpc":"2.0","id":"big","method":"health","params":{"pad":"%s"}}`
		pad := max(n-80, 0)
		return pl.sendAwait(ctx, fmt.Sprintf(req, strings.Repeat("x", pad)), fmt.Sprintf(req, fmt.Sprintf("<%d bytes>", pad)), json.RawMessage(`"big"`))
	case "@close":
		if err := pl.p.CloseInput(); err != nil {
			return err
		}
		_, err := pl.p.Wait(ctx)
		if ctx.Err() != nil {
			return err
		}
		return nil // how the worker exited is the caller's to ask Wait
	}
	return pl.sendAwait(ctx, line, "", idOf(pl.subst(line)))
}

func (pl *player) sendAwait(ctx context.Context, line, shown string, id json.RawMessage) error {
	if err := pl.send(line, shown); err != nil {
		return err
	}
	return pl.await(ctx, id)
}

// send writes line with the variables substituted; Sent sees shown
// instead when it is set (a padded line's summary).
func (pl *player) send(line, shown string) error {
	line = pl.subst(line)
	if shown == "" {
		shown = line
	}
	return pl.p.write(line, shown)
}

func (pl *player) subst(line string) string {
	for k, v := range pl.vars {
		line = strings.ReplaceAll(line, "{{"+k+"}}", v)
	}
	return line
}

// idOf returns the id of a request line; null when it has none a reply
// could echo (a line that is not a request); nil for a notification,
// which gets no reply.
func idOf(line string) json.RawMessage {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if json.Unmarshal([]byte(line), &env) != nil || len(env.ID) == 0 {
		if env.Method != nil && env.ID == nil {
			return nil
		}
		return json.RawMessage("null")
	}
	return env.ID
}

// await reads until the reply with id, noting the leases results name.
func (pl *player) await(ctx context.Context, id json.RawMessage) error {
	if id == nil {
		return nil
	}
	reply, before, err := pl.p.Await(ctx, id)
	for _, m := range append(before, reply) {
		if m.IsReply() {
			pl.noteLease(m.Result)
		}
	}
	return err
}

func (pl *player) noteLease(result json.RawMessage) {
	var r struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		Metadata        struct {
			RemoteCwd   string `json:"remoteCwd"`
			FakeRootDir string `json:"fakeRootDir"`
		} `json:"metadata"`
	}
	if json.Unmarshal(result, &r) != nil || r.ProviderLeaseID == "" {
		return
	}
	pl.vars["lease"] = r.ProviderLeaseID
	for k, v := range map[string]string{"remoteCwd": r.Metadata.RemoteCwd, "fakeRootDir": r.Metadata.FakeRootDir} {
		if v != "" {
			pl.vars[k] = v
		}
	}
}
