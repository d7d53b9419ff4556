package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// results are the bench's measurements.
type results struct {
	// created: (a) CRD Established -> Deployment created; recreated: (b)
	// Deployment deleted -> recreated; gone: (c) CRD deleted -> Deployment
	// gone.
	created, recreated, gone []time.Duration
	// createdFloor and goneFloor are the floor of (a) and (c), in the same
	// cycles (floor.go).
	createdFloor, goneFloor []time.Duration
	// writes: (d) the operator's API writes in the steady window, steady
	// long.
	writes writeCount
	steady time.Duration
}

// writeCount is the operator's non-GET requests, by method.
type writeCount map[string]float64

func (w writeCount) total() float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	return sum
}

// measure runs (a)+(c), (b) and (d) once the operator has settled.
func (b *bench) measure(ctx context.Context) (results, error) {
	// The operator's first reconcile may still be updating what an earlier
	// run left (a new image tag, say): wait until it is done.
	framework.Logf("waiting for every controller to be Ready and the operator to be idle")
	if err := b.waitSettled(ctx, 4*b.opts.Timeout); err != nil {
		return results{}, err
	}
	if _, err := b.waitQuiet(ctx, 2*time.Second); err != nil {
		return results{}, err
	}
	var r results
	var err error
	if err = b.runCRDCycles(ctx, &r); err != nil {
		return r, err
	}
	if r.recreated, err = b.runSelfHealCycles(ctx); err != nil {
		return r, err
	}
	r.writes, err = b.steadyWrites(ctx)
	r.steady = b.opts.steady
	return r, err
}

// waitSettled waits until the APIGateway is Ready for its generation and
// the Deployment of every controller it runs is fully rolled out.
func (b *bench) waitSettled(ctx context.Context, timeout time.Duration) error {
	return b.waitUntil(ctx, timeout, "APIGateway Ready and every Deployment available", func(ctx context.Context) (bool, string, error) {
		gw := &operatorv1alpha1.APIGateway{}
		if err := b.informers.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw); err != nil {
			return false, "APIGateway not found", client.IgnoreNotFound(err)
		}
		var why []string
		for _, c := range gw.Status.Controllers {
			why = append(why, fmt.Sprintf("%s %s: %s", c.Name, c.Phase, c.Message))
		}
		if gw.Status.State != operatorv1alpha1.StateReady || gw.Status.ObservedGeneration != gw.Generation {
			return false, fmt.Sprintf("APIGateway state %q, observedGeneration %d/%d; %s",
				gw.Status.State, gw.Status.ObservedGeneration, gw.Generation, strings.Join(why, "; ")), nil
		}
		for _, c := range gw.Status.Controllers {
			ctl, ok := contract.ControllerNamed(c.Name)
			if !ok || c.Phase == operatorv1alpha1.PhaseDisabled {
				continue
			}
			d := &appsv1.Deployment{}
			if err := b.informers.Get(ctx, client.ObjectKey{Namespace: b.opts.namespace, Name: ctl.Binary()}, d); err != nil {
				return false, "deployment " + ctl.Binary() + " not found", client.IgnoreNotFound(err)
			}
			if !available(d) {
				return false, fmt.Sprintf("deployment %s: %d/%d available", d.Name, d.Status.AvailableReplicas, replicas(d)), nil
			}
		}
		return true, "", nil
	})
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func available(d *appsv1.Deployment) bool {
	want := replicas(d)
	return d.DeletionTimestamp == nil && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.Replicas == want && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want
}

func progress(done, total int) {
	if done == total || done%10 == 0 {
		framework.Logf("  %d/%d cycles", done, total)
	}
}

// runCRDCycles measures (a) and (c), and their floor: each cycle deletes
// the gated CRD and creates it again.
func (b *bench) runCRDCycles(ctx context.Context, r *results) error {
	framework.Logf("(a)+(c): %d cycles of deleting and re-creating CRD %s", b.opts.cycles, gatedCRD.Name)
	if err := b.ensureFloor(ctx); err != nil {
		return err
	}
	for i := range b.opts.cycles {
		if err := b.waitSettled(ctx, b.opts.Timeout); err != nil {
			return fmt.Errorf("cycle %d: %w", i+1, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := b.informers.Get(ctx, client.ObjectKey{Name: gatedCRD.Name}, crd); err != nil {
			return fmt.Errorf("cycle %d: CRD %s: %w", i+1, gatedCRD.Name, err)
		}
		g, gf, err := b.deleteGatedCRD(ctx, crd)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i+1, err)
		}
		c, cf, err := b.createGatedCRD(ctx, crd.UID)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", i+1, err)
		}
		r.created, r.gone = append(r.created, c), append(r.gone, g)
		r.createdFloor, r.goneFloor = append(r.createdFloor, cf), append(r.goneFloor, gf)
		progress(i+1, b.opts.cycles)
	}
	return nil
}

// deleteGatedCRD measures (c) CRD deleted -> Deployment gone and its
// floor, and waits until the CRD is removed.
func (b *bench) deleteGatedCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (gone, floor time.Duration, err error) {
	if err := b.waitCRDServing(ctx, crd); err != nil {
		return 0, 0, err
	}
	floorSeen, floorGone := b.hub.expect(isTerminating), b.hub.expect(isDeployment(floorDeployment, framework.Deleted))
	deploymentGone := b.hub.expect(isDeployment(gatedDeployment, framework.Deleted))
	crdGone := b.hub.expect(isCRD(gatedCRD.Name, framework.Deleted))
	// Only for --verbose: when the bench saw the deletionTimestamp.
	terminating := b.hub.expect(func(e framework.Event) bool {
		return isCRD(gatedCRD.Name, framework.Updated)(e) && e.Object.GetDeletionTimestamp() != nil
	})
	defer b.hub.cancel(terminating)
	call := time.Now()
	if err := b.c.Delete(ctx, crd, client.Preconditions{UID: &crd.UID}); err != nil {
		b.hub.cancel(deploymentGone, crdGone, floorSeen, floorGone)
		return 0, 0, fmt.Errorf("delete CRD %s: %w", gatedCRD.Name, err)
	}
	t0 := time.Now()
	if floor, err = b.floorDelete(ctx, t0, floorSeen, floorGone); err != nil {
		b.hub.cancel(deploymentGone, crdGone)
		return 0, 0, err
	}
	e, err := b.await(ctx, deploymentGone, b.opts.Timeout, "deployment "+gatedDeployment+" to be deleted after its CRD was")
	if err != nil {
		b.hub.cancel(crdGone)
		return 0, 0, err
	}
	removed, err := b.await(ctx, crdGone, b.opts.Timeout, "CRD "+gatedCRD.Name+" to be removed")
	if err != nil {
		return 0, 0, err
	}
	if b.opts.verbose {
		framework.Logf("  (c) t0 %s delete returned (call took %s), deletionTimestamp seen %s, Deployment Deleted %s, CRD removed %s",
			stamp(t0), msSince(call, t0), seenAfter(t0, terminating), msSince(t0, e.At), msSince(t0, removed.At))
	}
	return e.At.Sub(t0), floor, nil
}

// createGatedCRD measures (a) CRD Established -> Deployment created and
// its floor.
func (b *bench) createGatedCRD(ctx context.Context, oldUID types.UID) (created, floor time.Duration, err error) {
	isEstablished := b.hub.expect(func(e framework.Event) bool {
		c, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition)
		return ok && c.Name == gatedCRD.Name && c.UID != oldUID && e.Type != framework.Deleted && contract.StateOf(c).Established
	})
	deploymentAdded := b.hub.expect(isDeployment(gatedDeployment, framework.Added))
	floorAdded := b.hub.expect(isDeployment(floorDeployment, framework.Added))
	manifest, err := framework.CRDManifest(b.gatedSource)
	if err != nil {
		b.hub.cancel(isEstablished, deploymentAdded, floorAdded)
		return 0, 0, err
	}
	created0 := time.Now()
	if err := b.c.Create(ctx, manifest); err != nil {
		b.hub.cancel(isEstablished, deploymentAdded, floorAdded)
		return 0, 0, fmt.Errorf("create CRD %s: %w", gatedCRD.Name, err)
	}
	est, err := b.await(ctx, isEstablished, b.opts.Timeout, "CRD "+gatedCRD.Name+" to be Established")
	if err != nil {
		b.hub.cancel(deploymentAdded, floorAdded)
		return 0, 0, err
	}
	if floor, err = b.floorCreate(ctx, est.At, floorAdded); err != nil {
		b.hub.cancel(deploymentAdded)
		return 0, 0, err
	}
	add, err := b.await(ctx, deploymentAdded, b.opts.Timeout, "deployment "+gatedDeployment+" to be created after its CRD was")
	if err != nil {
		return 0, 0, err
	}
	if b.opts.verbose {
		framework.Logf("  (a) t0 %s Established seen, Deployment Added %s (CRD created %s before t0)",
			stamp(est.At), msSince(est.At, add.At), msSince(created0, est.At))
	}
	return add.At.Sub(est.At), floor, nil
}

// waitCRDServing lists the CRD's resources until the API server serves
// them. The API server builds a CRD's storage (and its watch cache) lazily,
// on the first request; a CRD deleted before that happened fails its
// finalizer's list with "storage is (re)initializing", and the finalizer
// then backs off exponentially: removal of the CRD stalls for seconds to
// minutes. On a real cluster istiod watches EnvoyFilters, so the storage is
// always built; this list does the same for the bench. It is not part of
// any measurement.
func (b *bench) waitCRDServing(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			version = v.Name
		}
	}
	path := fmt.Sprintf("/apis/%s/%s/%s", crd.Spec.Group, version, crd.Spec.Names.Plural)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, b.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		// client-go itself retries the 429 the API server sends while the
		// watch cache initializes.
		last = b.rest.Get().AbsPath(path).Param("limit", "1").Do(ctx).Error()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("list %s: %w (last: %v)", path, err, last)
	}
	return nil
}

// runSelfHealCycles measures (b): each cycle deletes the healed Deployment.
func (b *bench) runSelfHealCycles(ctx context.Context) ([]time.Duration, error) {
	framework.Logf("(b): %d cycles of deleting deployment %s", b.opts.cycles, healedDeployment)
	var out []time.Duration
	for i := range b.opts.cycles {
		if err := b.waitSettled(ctx, b.opts.Timeout); err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		d, err := b.healCycle(ctx)
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		out = append(out, d)
		progress(i+1, b.opts.cycles)
	}
	return out, nil
}

func (b *bench) healCycle(ctx context.Context) (time.Duration, error) {
	d := &appsv1.Deployment{}
	if err := b.informers.Get(ctx, client.ObjectKey{Namespace: b.opts.namespace, Name: healedDeployment}, d); err != nil {
		return 0, fmt.Errorf("deployment %s: %w", healedDeployment, err)
	}
	oldUID := d.UID
	back := b.hub.expect(func(e framework.Event) bool {
		return isDeployment(healedDeployment, framework.Added, framework.Updated)(e) && e.Object.GetUID() != oldUID
	})
	// Only for --verbose: when the bench saw the old one go.
	oldGone := b.hub.expect(isDeployment(healedDeployment, framework.Deleted))
	defer b.hub.cancel(oldGone)
	call := time.Now()
	if err := b.c.Delete(ctx, d, client.Preconditions{UID: &oldUID}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		b.hub.cancel(back)
		return 0, fmt.Errorf("delete deployment %s: %w", healedDeployment, err)
	}
	t0 := time.Now()
	e, err := b.await(ctx, back, b.opts.Timeout, "deployment "+healedDeployment+" to be recreated")
	if err != nil {
		return 0, err
	}
	if b.opts.verbose {
		framework.Logf("  (b) t0 %s delete returned (call took %s), Deleted seen %s, new Deployment Added %s",
			stamp(t0), msSince(call, t0), seenAfter(t0, oldGone), msSince(t0, e.At))
	}
	return e.At.Sub(t0), nil
}

// steadyWrites measures (d): the operator's API writes over --steady once
// nothing changes any more.
func (b *bench) steadyWrites(ctx context.Context) (writeCount, error) {
	framework.Logf("(d): waiting for quiescence")
	if err := b.waitSettled(ctx, 4*b.opts.Timeout); err != nil {
		return nil, err
	}
	last, err := b.waitQuiet(ctx, b.opts.quiet)
	if err != nil {
		return nil, err
	}
	framework.Logf("(d): counting the operator's API writes for %s", b.opts.steady)
	select {
	case <-time.After(b.opts.steady):
	case <-b.op.Done():
		return nil, fmt.Errorf("operator exited: %v (log: %s)", b.op.Err(), b.op.LogPath)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	end, err := b.writes(ctx)
	if err != nil {
		return nil, err
	}
	delta := writeCount{}
	for method, v := range end {
		if d := v - last[method]; d != 0 {
			delta[method] = d
		}
	}
	return delta, nil
}

// waitQuiet waits until the operator's write counter has not moved for d,
// and returns the counter. Status writes and Events of the last rollout
// trail the Deployments' availability. It samples /metrics, which is fine:
// it only decides when a measurement starts.
func (b *bench) waitQuiet(ctx context.Context, d time.Duration) (writeCount, error) {
	m, err := b.op.WaitSteady(ctx, d, 4*b.opts.Timeout, func(m framework.Metrics) float64 { return writesOf(m).total() })
	if err != nil {
		return nil, err
	}
	return writesOf(m), nil
}
