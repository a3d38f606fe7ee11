package ratelimitpolicy

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
)

// TestMemoryReasonsAreTheMonitors: CountersProtected carries the monitor's reasons and
// findings as they are, so the API's names for them must be the monitor's.
func TestMemoryReasonsAreTheMonitors(t *testing.T) {
	for api, monitor := range map[string]string{
		v1alpha1.ReasonCountersProtected:     redismemory.ReasonProtected,
		v1alpha1.ReasonMemoryNotChecked:      redismemory.ReasonNotChecked,
		v1alpha1.ReasonMissingGrants:         redismemory.ReasonMissingGrants,
		v1alpha1.ReasonRedisUnavailable:      redismemory.ReasonRedisUnavailable,
		v1alpha1.ReasonCountersEvictable:     string(redismemory.CountersEvictable),
		v1alpha1.ReasonMemoryUnbounded:       string(redismemory.MemoryUnbounded),
		v1alpha1.ReasonClientMemoryUnbounded: string(redismemory.ClientMemoryUnbounded),
		v1alpha1.ReasonRepliesUnbounded:      string(redismemory.RepliesUnbounded),
		v1alpha1.ReasonValuesUnbounded:       string(redismemory.ValuesUnbounded),
		v1alpha1.ReasonForeignKeys:           string(redismemory.ForeignKeys),
	} {
		if api != monitor {
			t.Errorf("API reason %q, monitor's %q", api, monitor)
		}
	}
}
