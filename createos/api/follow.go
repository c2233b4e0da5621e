package api

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// maxReconnects bounds how often one process's output is reconnected
// before its exit is recovered through wait, and again after that.
const maxReconnects = 3

// waitQuery is the process wait the reference sends: the whole tree, 30 s.
const waitQuery = "/wait?scope=tree&timeout_ms=30000"

// Follower reads one managed process's output journal over /connect
// (execute.ts followProcess of v0.3).
type Follower struct {
	Client *Client
	Path   string // /sandboxes/{id}/processes/{pid}
	// Deliver gets each data frame's bytes once, in order; they are the
	// caller's to keep.
	Deliver func(stream string, p []byte)
	PTY     bool // pty frames are valid (a session's process)
	cursor  int64
	Delay   time.Duration // between reconnects (250 ms)
	Replay  time.Duration // before replaying past a recovered exit (1 s)
	// Attached, when set, runs once, when the first connect has answered
	// and before its body is read: a command opens its start gate there.
	// Its error ends the follow.
	Attached func(ctx context.Context) error
}

// followState is what one follow counts across its connections: the
// reconnects (one counter for failed connects and ended streams, never
// reset on success) and the exit recovered through wait, once it is.
type followState struct {
	reconnects int
	recovered  *recoveredExit
}

// Follow connects (and reconnects) until the process's exit: its exit
// frame, or past maxReconnects streams that ended without one, the exit
// wait reports once every frame up to its newest_seq was read (ended).
// Retryable: a failed connect with 429, 5xx or a transport error, and a
// stream that ends or breaks without an exit. Protocol errors are fatal.
func (f *Follower) Follow(ctx context.Context) (*ExitStatus, error) {
	var s followState
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		resp, err := f.Client.request(ctx, http.MethodGet, f.Path+"/connect?after="+strconv.FormatInt(f.cursor, 10), nil, "")
		if err != nil {
			if err := f.connectFailed(ctx, err, &s); err != nil {
				return nil, err
			}
			continue
		}
		st, err := f.read(ctx, resp)
		switch {
		case st != nil:
			return st, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case err != nil && !errors.Is(err, errStreamBroken):
			return nil, err
		}
		if st, err := f.ended(ctx, &s); st != nil || err != nil {
			return st, err
		}
	}
}

// connectFailed decides on a connect that failed: nil to connect again
// after the delay, else the error that ends the follow (410 is evicted
// output; other statuses below 500 but 429, and an ended ctx, are final;
// past the reconnects the connection failed).
func (f *Follower) connectFailed(ctx context.Context, err error, s *followState) error {
	if IsStatus(err, http.StatusGone) {
		return errEvicted
	}
	var ae *APIError
	if ctx.Err() != nil || errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
		return err
	}
	if s.reconnects++; s.reconnects > maxReconnects {
		return errOutputConnection
	}
	return Sleep(ctx, f.Delay)
}

// ended decides on a stream that ended without an exit (v0.3): within the
// reconnects, connect again after the delay. Past them the first time,
// the exit is recovered through wait: it is the result once every frame
// up to the journal's newest was read; else the reconnects start over
// after the replay delay, for the missing tail. Past them again, the
// recovered exit is the result only if the tail arrived meanwhile.
func (f *Follower) ended(ctx context.Context, s *followState) (*ExitStatus, error) {
	if s.reconnects++; s.reconnects <= maxReconnects {
		return nil, Sleep(ctx, f.Delay)
	}
	if s.recovered == nil {
		rec, err := f.recover(ctx)
		if err != nil {
			return nil, err
		}
		if f.cursor == rec.newestSeq {
			return &rec.exit, nil
		}
		s.recovered, s.reconnects = rec, 0
		return nil, Sleep(ctx, f.Replay)
	}
	if f.cursor == s.recovered.newestSeq {
		return &s.recovered.exit, nil
	}
	return nil, errReplayIncomplete
}

// recover asks GET …/wait for the exit of the whole tree, again at once
// while it answers 408 (the wait timed out), until ctx ends.
func (f *Follower) recover(ctx context.Context) (*recoveredExit, error) {
	for {
		data, err := f.Client.JSON(ctx, http.MethodGet, f.Path+waitQuery, nil)
		if IsStatus(err, http.StatusRequestTimeout) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, err := recoveredExitOf(data, f.cursor)
		if err == nil {
			zerolog.Ctx(ctx).Info().Str("path", f.Path).Int64("cursor", f.cursor).Int64("newestSeq", rec.newestSeq).
				Msg("CreateOS process exit recovered through wait")
		}
		return rec, err
	}
}

// recoveredExit is an exit wait reported, with the journal's newest seq.
type recoveredExit struct {
	exit      ExitStatus
	newestSeq int64
}

// recoveredExitOf reads a wait answer for a reader at cursor: output must
// be an object whose newest_seq is a safe integer at or past cursor, and
// the exit is read as the exit frame's, an empty signal being none.
func recoveredExitOf(data Object, cursor int64) (*recoveredExit, error) {
	out, ok := asObject(data["output"])
	if !ok {
		return nil, errInvalidResponse
	}
	n, ok := out.num("newest_seq")
	if !ok || n != math.Trunc(n) || math.Abs(n) > 1<<53-1 || int64(n) < cursor {
		return nil, errJournalInvalid
	}
	st, err := exitOf(data)
	if err != nil {
		return nil, err
	}
	if st.Signal != nil && *st.Signal == "" {
		st.Signal = nil
	}
	return &recoveredExit{exit: *st, newestSeq: int64(n)}, nil
}

// read consumes one connection's frames; nil, nil means the stream ended
// without an exit. The attached hook, if it has yet to run, runs first.
func (f *Follower) read(ctx context.Context, resp *http.Response) (*ExitStatus, error) {
	defer resp.Body.Close()
	if hook := f.Attached; hook != nil {
		f.Attached = nil
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	fr := newFrameReader(resp.Body)
	for {
		o, err := fr.next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		st, err := f.handle(o)
		if err != nil || st != nil {
			return st, err
		}
	}
}
