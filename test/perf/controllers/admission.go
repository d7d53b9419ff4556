package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

const (
	// admissionPolicy is config/admission's policy, which has the API
	// server put the apirule controller's finalizer on every APIRule it
	// admits while the controller's Deployment exists.
	admissionPolicy = "config/admission/apirule-finalizer.yaml"
	// apiruleFinalizer is the finalizer the policy sets (the controller's
	// Finalizer).
	apiruleFinalizer = "gateway.portico.dev/apirule-cleanup"
	// policyWait bounds how long the API server may take to load the
	// policy and see its parameter.
	policyWait = 30 * time.Second
)

// installFinalizerPolicy installs config/admission and, as its parameter,
// a stand-in for the Deployment the operator would create for the apirule
// controller (no replicas: the bench runs the controller as a process).
// Then every APIRule is created with the finalizer on, in the floor's
// phases as in the controller's, and the controller patches none: the
// shipped configuration on Kubernetes 1.36. It returns once an APIRule
// created as a probe carries the finalizer.
func (b *bench) installFinalizerPolicy(ctx context.Context) error {
	objs, err := readManifest(framework.RepoPath(admissionPolicy))
	if err != nil {
		return err
	}
	standIn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": contract.APIRule.Binary(), "namespace": controllerNS},
		"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "bench-stand-in"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "bench-stand-in"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "manager", "image": "stand-in"}}},
			},
		},
	}}
	for _, obj := range append(objs, standIn) {
		if err := b.createOrReplace(ctx, obj); err != nil {
			return err
		}
	}
	probe := b.plan.apiRules[0].DeepCopy()
	probe.ObjectMeta = metav1.ObjectMeta{Name: "finalizer-probe", Namespace: controllerNS}
	var admitted bool
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, policyWait, true, func(ctx context.Context) (bool, error) {
		rule := probe.DeepCopy()
		switch err := b.c.Create(ctx, rule); {
		case apierrors.IsServiceUnavailable(err):
			// Admission does not resolve the just-installed kind yet.
			return false, nil
		case err != nil:
			return false, fmt.Errorf("create APIRule %s/%s: %w", rule.Namespace, rule.Name, err)
		}
		admitted = slices.Contains(rule.Finalizers, apiruleFinalizer)
		return admitted, b.release(ctx, types.NamespacedName{Namespace: rule.Namespace, Name: rule.Name})
	})
	if err != nil {
		return fmt.Errorf("the API server did not apply %s within %s (a created APIRule has no finalizer %s): %w",
			admissionPolicy, policyWait, apiruleFinalizer, err)
	}
	framework.Logf("the API server puts the finalizer on every APIRule (%s, Deployment %s/%s stands in for the operator's)",
		admissionPolicy, controllerNS, contract.APIRule.Binary())
	return nil
}

// release deletes an APIRule that no controller finalizes: its finalizers
// off, as an administrator would, then the object.
func (b *bench) release(ctx context.Context, key types.NamespacedName) error {
	rule := &gatewayv1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := b.c.Patch(ctx, rule, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("remove the finalizers of APIRule %s: %w", key, err))
	}
	if err := b.c.Delete(ctx, rule); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete APIRule %s: %w", key, err)
	}
	return nil
}
