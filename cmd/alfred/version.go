package main

import (
	"cmp"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version string

// versionString returns version, else the module version and VCS revision recorded by the Go
// toolchain, followed by the Go version.
func versionString() string {
	v, rev := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		v = cmp.Or(v, info.Main.Version)
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	v = cmp.Or(v, "(devel)")
	if rev != "" && version == "" {
		v += " " + rev
	}
	return v + " " + runtime.Version()
}
