// Package message bounds the human-readable text the operator writes into
// API objects (status messages, condition messages, Event notes) to the
// length limits the API server enforces, so an overlong error from the API
// server or a kubelet can never make a status or Event write fail.
//
// It is pure string handling; it knows nothing about the objects the text
// ends up in beyond their limits.
package message
