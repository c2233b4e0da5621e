package createos

import (
	"os"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (a pacer turn,
// a follower, a tracked call, an HTTP connection left open). Every driver
// of the tests keeps its sync store in a temp dir of the run's, unless the
// test gives one.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "createos-test-store-")
	if err != nil {
		panic(err)
	}
	os.Setenv(StoreDirEnv, dir)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// baseConfig is a valid config with over's fields set (a nil value
// removes the field).
func baseConfig(over handlers.Object) handlers.Object {
	c := handlers.Object{"apiUrl": "https://createos.example.test", "apiKey": "test-secret", "shape": "test-shape", "timeoutMs": float64(5000)}
	for k, v := range over {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}
