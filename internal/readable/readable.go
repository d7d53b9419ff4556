package readable

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterWide is the scope of a list over every namespace.
const ClusterWide = ""

// Listing is what a caller could read of one kind.
type Listing[T any] struct {
	// Items are the objects the caller may read, of the scopes it may list.
	Items []T
	// Hidden are the scopes (namespaces, or ClusterWide) the caller may not
	// list, sorted. With ClusterWide hidden and no namespace to try, the
	// caller saw nothing of this kind.
	Hidden []string
	// Listed are the namespaces listed one by one after a cluster-wide list
	// was forbidden, sorted.
	Listed []string
	// Absent is true when the kind is not served (its CRD is not installed).
	Absent bool
}

// Visible reports whether objects of namespace ns could have been listed.
func (l Listing[T]) Visible(ns string) bool {
	if l.Absent || slices.Contains(l.Hidden, ns) {
		return false
	}
	return !slices.Contains(l.Hidden, ClusterWide) || slices.Contains(l.Listed, ns)
}

// List lists one kind: across the cluster if the caller may, else in each
// of fallback (the namespaces the caller works in), recording the scopes
// it may not list. items extracts the objects of a filled list. Errors
// other than Forbidden and an unserved kind are returned.
func List[T any](ctx context.Context, r client.Reader, newList func() client.ObjectList, items func(client.ObjectList) []T, fallback []string) (Listing[T], error) {
	var out Listing[T]
	list := newList()
	err := r.List(ctx, list)
	switch {
	case err == nil:
		out.Items = items(list)
		return out, nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		out.Absent = true
		return out, nil
	case !apierrors.IsForbidden(err):
		return out, fmt.Errorf("list across the cluster: %w", err)
	}
	out.Hidden = append(out.Hidden, ClusterWide)
	for _, ns := range slices.Compact(slices.Sorted(slices.Values(fallback))) {
		list := newList()
		err := r.List(ctx, list, client.InNamespace(ns))
		switch {
		case err == nil:
			out.Items = append(out.Items, items(list)...)
			out.Listed = append(out.Listed, ns)
		case apierrors.IsForbidden(err):
			out.Hidden = append(out.Hidden, ns)
		default:
			return out, fmt.Errorf("list in namespace %s: %w", ns, err)
		}
	}
	return out, nil
}
