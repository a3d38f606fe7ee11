// Package crd embeds the CustomResourceDefinitions that `make manifests` writes to bases/,
// for programs that check resources offline as the API server would (`kubectl ratelimit
// lint`, internal/lint). The YAML files are generated; this file is not.
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition each.
//
//go:embed bases/*.yaml
var Bases embed.FS
