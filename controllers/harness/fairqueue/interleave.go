package fairqueue

import "slices"

// Interleave orders items so that tenants take turns: the first item of
// every tenant, then every second one, and so on, the tenants with the
// fewest items first (ties in the order they first appear); each tenant's
// items keep their order. A state-of-the-world reconcile that writes many
// objects uses it so that the writes of a tenant with few objects do not
// wait behind all of another's.
func Interleave[T any](items []T, tenantOf func(T) string) []T {
	var order []string
	byTenant := map[string][]T{}
	for _, item := range items {
		t := tenantOf(item)
		if _, seen := byTenant[t]; !seen {
			order = append(order, t)
		}
		byTenant[t] = append(byTenant[t], item)
	}
	slices.SortStableFunc(order, func(a, b string) int { return len(byTenant[a]) - len(byTenant[b]) })
	out := make([]T, 0, len(items))
	for round := 0; len(out) < len(items); round++ {
		for _, t := range order {
			if round < len(byTenant[t]) {
				out = append(out, byTenant[t][round])
			}
		}
	}
	return out
}
