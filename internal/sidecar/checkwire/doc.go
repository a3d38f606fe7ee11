// Package checkwire is the wire form of a check stated by a trusted caller, and its
// conversion to and from the engine: the check API's body (Request) becomes a policy and an
// engine check (CheckOf), and an outcome becomes the check API's answer (Response,
// ResponseOf), a peek's limits internal/usage's wire form (UsageOf). The sidecar's check
// API (package httpcheck) and the manager's usage API (internal/usageapi), which answers a
// usage read as the check API answers a peek, share it: it is no front, so the manager
// links the engine and this form, never a sidecar front.
//
// It serves no HTTP and reads no body: each front decodes and answers in its own way. How
// a stated cost and composite identity are read is package requestread's.
package checkwire
