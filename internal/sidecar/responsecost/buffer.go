package responsecost

// appendBounded appends p to buf, which the caller keeps at most limit bytes long. It
// grows buf by doubling, capped at limit, so that reaching limit allocates under 2*limit
// in all (append alone grows large slices by a quarter at a time).
func appendBounded(buf, p []byte, limit int) []byte {
	if need := len(buf) + len(p); need > cap(buf) {
		grown := make([]byte, len(buf), min(max(need, 2*cap(buf), 512), limit))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, p...)
}
