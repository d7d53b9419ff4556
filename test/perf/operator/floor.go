package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// The floor of (a) and (c), measured in the same cycles: the bench itself
// reacts to the event the operator reacts to (the CRD Established; the CRD
// terminating) with the one write the operator makes (create or delete a
// Deployment), the moment its informer delivers that event, and times it
// the same way, until its informer delivers the write's own event. That is
// what any reactor pays (a watch delivery, a write, a watch delivery) and
// none of what the operator adds (its queue, its reconcile, its checks).
// The two writes run side by side on the same API server, so both see the
// same load.

// floorDeployment is the Deployment the floor creates and deletes, beside
// the operator's in its namespace (the operator ignores it: it carries
// none of its labels).
const floorDeployment = "portico-bench-floor"

// floorObject is floorDeployment: no replicas, so nothing but the object.
func (b *bench) floorObject() *appsv1.Deployment {
	labels := map[string]string{"app": floorDeployment}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.opts.namespace, Name: floorDeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "floor", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// floorCreate creates the floor's Deployment now (the bench just saw the
// CRD Established at since) and returns the time from since until the
// bench sees it Added.
func (b *bench) floorCreate(ctx context.Context, since time.Time, added *waiter) (time.Duration, error) {
	if err := b.c.Create(ctx, b.floorObject()); err != nil {
		b.hub.cancel(added)
		return 0, fmt.Errorf("create the floor's deployment: %w", err)
	}
	e, err := b.await(ctx, added, b.opts.Timeout, "deployment "+floorDeployment+" to be created")
	return e.At.Sub(since), err
}

// floorDelete waits until the bench sees the CRD terminating (or gone),
// deletes the floor's Deployment then, and returns the time from t0 (the
// CRD's delete call returned) until the bench sees it Deleted.
func (b *bench) floorDelete(ctx context.Context, t0 time.Time, terminating, deleted *waiter) (time.Duration, error) {
	if _, err := b.await(ctx, terminating, b.opts.Timeout, "CRD "+gatedCRD.Name+" to be terminating"); err != nil {
		b.hub.cancel(deleted)
		return 0, err
	}
	if err := b.c.Delete(ctx, b.floorObject()); err != nil {
		b.hub.cancel(deleted)
		return 0, fmt.Errorf("delete the floor's deployment: %w", err)
	}
	e, err := b.await(ctx, deleted, b.opts.Timeout, "deployment "+floorDeployment+" to be deleted")
	return e.At.Sub(t0), err
}

// isTerminating matches the gated CRD's first event once its delete was
// accepted: an update with a deletionTimestamp, or its removal.
func isTerminating(e framework.Event) bool {
	crd, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition)
	return ok && crd.Name == gatedCRD.Name && (e.Type == framework.Deleted || crd.DeletionTimestamp != nil)
}

// ensureFloor creates the floor's Deployment before the first cycle (whose
// (c) deletes it), unless an earlier run left it.
func (b *bench) ensureFloor(ctx context.Context) error {
	err := b.c.Create(ctx, b.floorObject())
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the floor's deployment: %w", err)
	}
	return nil
}
