package ssa

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply server-side applies a typed object (with apiVersion and kind set)
// as fieldManager, forcing ownership. Typed Istio objects have no apply
// configurations usable by controller-runtime, so the object goes through
// its own JSON (which the proto messages marshal faithfully); status is
// dropped because it is a subresource.
func Apply(ctx context.Context, c client.Client, obj client.Object, fieldManager string) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return fmt.Errorf("convert %T: %w", obj, err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
