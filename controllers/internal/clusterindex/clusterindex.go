package clusterindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The name and key prefix controller-runtime's cache reader looks up for
// client.MatchingFields without a namespace (FieldIndexName and
// KeyToNamespacedKey("", key) of its internal package).
const (
	indexPrefix   = "field:"
	allNamespaces = "__all_namespaces/"
)

// Field registers the index field of obj's kind on c, with the keys
// extract returns, for List calls that match the field across all
// namespaces.
func Field(ctx context.Context, c cache.Informers, obj client.Object, field string, extract client.IndexerFunc) error {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("index %s: %w", field, err)
	}
	return informer.AddIndexers(toolscache.Indexers{indexPrefix + field: func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("index %s: %T is not an object", field, raw)
		}
		keys := extract(o)
		if len(keys) == 0 {
			return nil, nil
		}
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = allNamespaces + k
		}
		return out, nil
	}})
}
