// Package golden tells code outside the apirule controller (the
// controllers' benchmark in test/perf) exactly what the controller writes
// for an APIRule that passes every check: its objects, in the order it
// writes them, and the statuses it patches. It computes them with the
// controller's own translation and condition builders, so a caller that
// writes them itself does the controller's work and no more. It reads and
// writes nothing, and it is not a way around the controller's checks: it
// assumes they pass.
package golden
