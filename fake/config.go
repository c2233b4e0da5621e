package fake

import (
	"math"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Config defaults, as the reference plugin has them.
const (
	DefaultImage          = "fake:latest"
	DefaultTimeoutMs      = 300000
	DefaultMaxOutputBytes = 16 << 20
)

// Config is the parsed driver config. Parsing never fails: a value of the
// wrong type falls back to its default.
type Config struct {
	Image      string
	TimeoutMs  float64
	ReuseLease bool
	// MaxOutputBytes is how much of each stream's tail the execute result
	// keeps (our addition; 0 means the default).
	MaxOutputBytes    int
	maxOutputBytesSet bool
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
	return c
}

// normalized is the config as environmentValidateConfig returns it.
func (c Config) normalized() handlers.Object {
	o := handlers.Object{"image": c.Image, "timeoutMs": c.TimeoutMs, "reuseLease": c.ReuseLease}
	if c.maxOutputBytesSet {
		o["maxOutputBytes"] = c.MaxOutputBytes
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
