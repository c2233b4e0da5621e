package fake

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Config defaults, as Paperclip's TypeScript fake provider has them.
const (
	DefaultImage          = "fake:latest"
	DefaultTimeoutMs      = 300000
	DefaultMaxOutputBytes = 16 << 20
)

// Config is the parsed driver config. Parsing never fails: a value of the
// wrong type falls back to its default, except path, whose invalid entries
// are errors (errs): a command must not run with a search path other than
// the one asked for.
type Config struct {
	Image      string
	TimeoutMs  float64
	ReuseLease bool
	// MaxOutputBytes is how much of each stream's tail the execute result
	// keeps (our addition; 0 means the default).
	MaxOutputBytes    int
	maxOutputBytesSet bool
	// Path is the directories every command is found through before the
	// PATH it would otherwise get (commandPATH); nil when absent.
	Path []string
	errs []string // what is wrong with path, one sentence each
}

func parseConfig(raw handlers.Object) Config {
	c := Config{Image: DefaultImage, TimeoutMs: DefaultTimeoutMs, MaxOutputBytes: DefaultMaxOutputBytes}
	if s, ok := raw["image"].(string); ok && strings.TrimSpace(s) != "" {
		c.Image = strings.TrimSpace(s)
	}
	if f, ok := raw["timeoutMs"].(float64); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
		c.TimeoutMs = f
	}
	if b, ok := raw["reuseLease"].(bool); ok && b {
		c.ReuseLease = true
	}
	if f, ok := raw["maxOutputBytes"].(float64); ok && f >= 1 && f <= math.MaxInt32 && f == math.Trunc(f) {
		c.MaxOutputBytes, c.maxOutputBytesSet = int(f), true
	}
	c.Path, c.errs = parsePath(raw["path"])
	return c
}

// parsePath reads the path field: absent or null is none; otherwise an
// array of absolute directories, none of which may hold ':' (it would split
// the PATH entry) or a NUL. It returns the directories, or what is wrong.
func parsePath(v any) ([]string, []string) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, []string{"path must be an array of absolute directories; got " + jsonText(v) + "."}
	}
	dirs := make([]string, 0, len(list))
	var errs []string
	for i, e := range list {
		if why := pathEntryErr(i, e); why != "" {
			errs = append(errs, why)
			continue
		}
		dirs = append(dirs, e.(string))
	}
	if errs != nil {
		return nil, errs
	}
	return dirs, nil
}

// pathEntryErr is what is wrong with entry i of path, "" for nothing.
func pathEntryErr(i int, e any) string {
	s, ok := e.(string)
	switch {
	case !ok || !filepath.IsAbs(s):
		return fmt.Sprintf("path[%d] must be an absolute directory; got %s.", i, jsonText(e))
	case strings.Contains(s, ":"):
		return fmt.Sprintf("path[%d] must not contain ':', which separates PATH entries; got %s.", i, jsonText(e))
	case strings.Contains(s, "\x00"):
		return fmt.Sprintf("path[%d] must not contain a NUL character; got %s.", i, jsonText(e))
	}
	return ""
}

// jsonText is v as JSON, for a message that quotes what was sent.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// check refuses a config a command cannot run with: one whose path is
// invalid.
func (c Config) check() error {
	if len(c.errs) == 0 {
		return nil
	}
	return errConfig(strings.Join(c.errs, " "))
}

// normalized is the config as environmentValidateConfig returns it.
func (c Config) normalized() handlers.Object {
	o := handlers.Object{"image": c.Image, "timeoutMs": c.TimeoutMs, "reuseLease": c.ReuseLease}
	if c.maxOutputBytesSet {
		o["maxOutputBytes"] = c.MaxOutputBytes
	}
	if c.Path != nil {
		o["path"] = c.Path
	}
	return o
}

// warnings flags values that parse but are unlikely to be meant.
func (c Config) warnings(raw handlers.Object) []string {
	var w []string
	if v, ok := raw["timeoutMs"]; ok {
		if f, isNum := v.(float64); !isNum {
			w = append(w, "timeoutMs is not a number; the default of 300000 ms applies.")
		} else if f <= 0 {
			w = append(w, "timeoutMs is 0 or less: commands run without a time limit.")
		}
	}
	if v, ok := raw["reuseLease"]; ok {
		if _, isBool := v.(bool); !isBool {
			w = append(w, "reuseLease is not a boolean; it is treated as false.")
		}
	}
	if v, ok := raw["image"]; ok {
		if s, isStr := v.(string); !isStr || strings.TrimSpace(s) == "" {
			w = append(w, "image is not a non-empty string; fake:latest applies.")
		}
	}
	if v, ok := raw["maxOutputBytes"]; ok && !c.maxOutputBytesSet {
		_ = v
		w = append(w, "maxOutputBytes must be a whole number from 1 to 2147483647; the default of 16 MiB applies.")
	}
	return w
}
