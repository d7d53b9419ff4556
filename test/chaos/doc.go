// Package chaos runs Portico's controllers through faults of the cluster
// they depend on. It runs the real apirule and ratelimit controller binaries
// against an envtest control plane of its own, whose API server it stops
// and starts again (testenv.RunInput.Restartable), and judges the outcome
// on what is stored: each object's Ready condition.
//
// The suite is tests only; nothing here may be imported by the product.
package chaos
