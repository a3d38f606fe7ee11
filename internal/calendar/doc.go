// Package calendar computes the windows of calendar quotas: days, weeks (Monday to Monday)
// and months that begin at local midnight in a named IANA time zone, so a day lasts 23, 24
// or 25 hours across a DST change and a month 28 to 31 days. The sidecar computes a window
// with Go's time zone database and hands its bounds to the FixedWindow script, which compares
// them to the Redis server clock (see internal/limiter).
package calendar

// The binaries carry the time zone database (about 450 kB): an image without
// /usr/share/zoneinfo still knows every zone, and a window does not depend on the host.
import _ "time/tzdata"
