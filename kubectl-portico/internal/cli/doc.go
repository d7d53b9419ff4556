// Package cli is the kubectl-portico command: flags, reading what the
// caller may read of the cluster (a list the caller's RBAC forbids is
// "not visible to you", never an error that hides the rest), and the text
// and JSON renderings of internal/explain's Explanation.
package cli
