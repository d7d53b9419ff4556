package metrics

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ConditionReady is the condition the Ready gauges count by.
const ConditionReady = "Ready"

// OtherReason is the reason label of a Ready condition whose reason the
// controller never writes: only another writer of the status can put one
// there, and the label's values stay the controller's few.
const OtherReason = "Other"

// ReadyLabels are the label values of an object in a Ready gauge: the
// status of its Ready condition ("Unknown" without one) and its reason (""
// without one, OtherReason when it is not among reasons).
func ReadyLabels(conditions []metav1.Condition, reasons []string) (ready, reason string) {
	c := meta.FindStatusCondition(conditions, ConditionReady)
	if c == nil {
		return string(metav1.ConditionUnknown), ""
	}
	switch c.Status {
	case metav1.ConditionTrue, metav1.ConditionFalse:
		ready = string(c.Status)
	default:
		ready = string(metav1.ConditionUnknown)
	}
	reason = c.Reason
	if reason != "" && !slices.Contains(reasons, reason) {
		reason = OtherReason
	}
	return ready, reason
}

// NewReadyGauge returns the gauge of a kind's objects by Ready condition:
// vec has the labels ready and reason, list is an empty list of the kind,
// conditions returns the conditions of an object of the kind (nil for
// anything else), and reasons are those the controller writes. The kind
// must be one the workers already watch: its informer is read, never
// started.
func NewReadyGauge(vec *prometheus.GaugeVec, list client.ObjectList, conditions func(runtime.Object) []metav1.Condition, reasons []string) *CacheGauge {
	return NewCacheGauge(vec, func(ctx context.Context, w *Workers, set func(float64, ...string)) error {
		type key struct{ ready, reason string }
		counts := map[key]int{}
		err := eachCached(ctx, w, list, func(o runtime.Object) {
			ready, reason := ReadyLabels(conditions(o), reasons)
			counts[key{ready, reason}]++
		})
		if err != nil {
			return err
		}
		for k, n := range counts {
			set(float64(n), k.ready, k.reason)
		}
		return nil
	})
}

// eachCached calls fn with every object of list's kind in the cache,
// shared with it (read-only): from the informer's store when it is
// reachable, which costs one slice of pointers, else (a cache of several
// namespaces) from a list without deep copies.
func eachCached(ctx context.Context, w *Workers, list client.ObjectList, fn func(runtime.Object)) error {
	gvk, err := apiutil.GVKForObject(list, w.Scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	informer, err := w.Cache.GetInformerForKind(ctx, gvk, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("informer of %s: %w", gvk.Kind, err)
	}
	if s, ok := informer.(interface{ GetStore() toolscache.Store }); ok {
		for _, o := range s.GetStore().List() {
			if obj, ok := o.(runtime.Object); ok {
				fn(obj)
			}
		}
		return nil
	}
	out := list.DeepCopyObject().(client.ObjectList)
	if err := w.Cache.List(ctx, out, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	return meta.EachListItem(out, func(o runtime.Object) error {
		fn(o)
		return nil
	})
}

// ReadyAt reports whether conditions say Ready=True for generation.
func ReadyAt(conditions []metav1.Condition, generation int64) bool {
	c := meta.FindStatusCondition(conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}
