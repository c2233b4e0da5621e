package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/createos"
	"github.com/paperclip-sandbox/sandbox-plugin/fake"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// driverFactories are the drivers this binary can serve, by driverKey.
var driverFactories = map[string]func(driverFlags) handlers.Driver{
	fake.Key: func(driverFlags) handlers.Driver { return fake.New() },
	createos.Key: func(f driverFlags) handlers.Driver {
		return createos.New(createos.WithStore(f.createosStore, f.createosStoreBytes()))
	},
}

// driverFlags are the command line's driver settings.
type driverFlags struct {
	createosStore   string // the createos sync store's directory; "" for the default
	createosStoreMB int64  // its bound in MiB; < 0 for the default
}

func (f driverFlags) createosStoreBytes() int64 {
	if f.createosStoreMB < 0 {
		return -1
	}
	return f.createosStoreMB << 20
}

// driverOrder is the order drivers appear in the manifest.
var driverOrder = []string{fake.Key, createos.Key}

func driverNames() []string { return append([]string(nil), driverOrder...) }

// buildDrivers instantiates the comma-separated driver keys in list.
func buildDrivers(list string, flags driverFlags) ([]handlers.Driver, error) {
	var out []handlers.Driver
	seen := map[string]bool{}
	for _, key := range strings.Split(list, ",") {
		key = strings.TrimSpace(key)
		if key == "" || seen[key] {
			continue
		}
		f, ok := driverFactories[key]
		if !ok {
			known := driverNames()
			sort.Strings(known)
			return nil, fmt.Errorf("unknown driver %q in --drivers; known drivers: %s", key, strings.Join(known, ", "))
		}
		seen[key] = true
		out = append(out, f(flags))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--drivers enables no driver; known drivers: %s", strings.Join(driverNames(), ", "))
	}
	return out, nil
}
