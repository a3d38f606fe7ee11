package main

import "runtime/debug"

// buildVersion is the release, set at build time with
// -ldflags "-X main.buildVersion=v0.1.0" (the Dockerfile's VERSION); empty in a plain build.
var buildVersion string

// version is the manager's version: buildVersion, else the main module's version from the
// build information, else "dev". Injected Pods carry it as ratelimit.dev/sidecar-version.
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
