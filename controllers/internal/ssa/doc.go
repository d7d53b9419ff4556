// Package ssa is the controllers' server-side apply: a typed object applied
// as the controller's field manager, forcing ownership of the fields it sets.
// Typed Istio objects have no apply configurations that controller-runtime
// can use, so they go through their own JSON.
package ssa
