package api

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
)

// ExecStream sends body to /exec?stream=true (v0.3 executeStream) and
// passes each frame's text to deliver, with its stream's name, until the
// exit frame, whose code it returns.
func (c *Client) ExecStream(ctx context.Context, id string, body map[string]any, deliver func(stream string, p []byte)) (*int, error) {
	resp, err := c.postJSON(ctx, "/sandboxes/"+id+"/exec?stream=true", body)
	if err != nil {
		return nil, err
	}
	return readExecStream(ctx, resp, deliver)
}

// ExecStreamOnce is ExecStream sent once (attempt): a rejection is
// returned, for the caller to decide what to send next.
func (c *Client) ExecStreamOnce(ctx context.Context, id string, body map[string]any, deliver func(stream string, p []byte)) (*int, error) {
	b, err := jsonBytes(body)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{"Content-Type": []string{"application/json"}}
	resp, err := c.attempt(ctx, http.MethodPost, "/sandboxes/"+id+"/exec?stream=true", bytesBody(b), hdr)
	if err != nil {
		return nil, err
	}
	return readExecStream(ctx, resp, deliver)
}

// readExecStream reads a streaming exec's answer, which it closes.
func readExecStream(ctx context.Context, resp *http.Response, deliver func(stream string, p []byte)) (*int, error) {
	defer resp.Body.Close()
	fr := newFrameReader(resp.Body)
	for {
		o, err := fr.next()
		switch {
		case err == io.EOF:
			return nil, ErrCommandStreamNoExit
		case errors.Is(err, errStreamBroken):
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, ErrCommandStreamNoExit
		case err != nil:
			return nil, err
		}
		code, done, err := streamFrame(o, deliver)
		if err != nil || done {
			return code, err
		}
	}
}

// MaxRequestBody is the largest request body the provider takes: a larger
// one is refused (HTTP 400) without being run. createostest enforces it.
const MaxRequestBody = 8 << 20

// BodySize is the size of body as JSON, as a request would carry it.
func BodySize(body map[string]any) (int, error) {
	b, err := jsonBytes(body)
	return len(b), err
}

// commandStreams are the text streams of a streaming exec.
var commandStreams = [2]string{"stdout", "stderr"}

// streamFrame applies one frame: a heartbeat is skipped, text goes to
// deliver (UTF-8 encoded, as the reference does), an error frame fails, and
// an integer exit_code ends the stream.
func streamFrame(o Object, deliver func(stream string, p []byte)) (code *int, done bool, err error) {
	if o.IsTrue("hb") {
		return nil, false, nil
	}
	for _, stream := range commandStreams {
		if s, ok := o.Str(stream); ok {
			deliver(stream, []byte(s))
			return nil, false, nil
		}
	}
	if _, ok := o.Str("error"); ok {
		return nil, true, ErrCommandStreamError
	}
	if f, ok := o.num("exit_code"); ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53-1 {
		n := int(f)
		return &n, true, nil
	}
	return nil, true, ErrCommandStreamEvent
}

// postJSON sends body as JSON and returns the 2xx response, whose body the
// caller owns.
func (c *Client) postJSON(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := jsonBytes(body)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, http.MethodPost, path, b, "application/json")
}
