package envoyrls

import (
	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// New is the RLS service over e, which logs its denials to log; grpcserver.New serves it.
func New(e *engine.Engine, log logr.Logger) *Service {
	return &Service{Engine: e, Log: log}
}
