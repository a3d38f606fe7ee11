// Package jsonreply writes the JSON answers of the sidecar's HTTP fronts: the check API's
// decisions, and the error bodies both the check API and the reverse proxy send.
package jsonreply

import (
	"encoding/json"
	"net/http"
)

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	// Error says what was wrong, naming the field.
	Error string `json:"error"`
}

// Error answers status with msg as an ErrorBody.
func Error(w http.ResponseWriter, status int, msg string) {
	Write(w, status, ErrorBody{Error: msg})
}

// Write answers status with v encoded as JSON.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}
