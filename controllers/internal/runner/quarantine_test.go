package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/internal/quarantine"
	"github.com/portico-dev/portico/internal/contract"
)

// TestRunQuarantinesUndecodableObjects: an APIRule whose status does not
// decode (a lower-case z time, which the API server admits) neither keeps
// the workers from reconciling every APIRule nor goes unreported.
func TestRunQuarantinesUndecodableObjects(t *testing.T) {
	g := NewWithT(t)
	// Bounds the waits; nothing is asserted about how long anything takes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ns := fmt.Sprintf("quarantine-%d", time.Now().UnixNano())
	g.Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, name := range []string{"good", "bad"} {
		g.Expect(k8sClient.Create(ctx, &porticov1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: porticov1alpha1.APIRuleSpec{
				Hosts:   []porticov1alpha1.Hostname{porticov1alpha1.Hostname(name + "." + ns + ".example.com")},
				Gateway: "istio-system/public",
				Service: &porticov1alpha1.ServiceReference{Name: "backend", Port: 8080},
				Rules:   []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}},
			},
		})).To(Succeed())
	}
	bad := &unstructured.Unstructured{}
	bad.SetGroupVersionKind(porticov1alpha1.GroupVersion.WithKind("APIRule"))
	bad.SetNamespace(ns)
	bad.SetName("bad")
	g.Expect(k8sClient.Status().Patch(ctx, bad, client.RawPatch(types.MergePatchType, []byte(
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Applied","message":"",`+
			`"lastTransitionTime":"2026-01-01T00:00:00z"}]}}`)))).To(Succeed())
	g.Expect(k8sClient.List(ctx, &porticov1alpha1.APIRuleList{}, client.InNamespace(ns))).NotTo(Succeed(),
		"without the guard the typed list fails")

	reconciled := make(chan string, 100)
	controller := Controller{
		Contract:    contract.Controller{Name: "quarantinetest", Required: []contract.CRD{contract.APIRules}},
		AddToScheme: []func(*runtime.Scheme) error{porticov1alpha1.AddToScheme},
		// The guard hands its decoded APIRules to the workers' cache.
		HandOff: []client.Object{&porticov1alpha1.APIRule{}},
		Setup: func(mgr ctrl.Manager, _ Environment) error {
			return ctrl.NewControllerManagedBy(mgr).Named("quarantinetest").For(&porticov1alpha1.APIRule{}).
				Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					if req.Namespace != ns {
						return reconcile.Result{}, nil
					}
					// What the cache holds is the whole object, not a placeholder.
					rule := &porticov1alpha1.APIRule{}
					if err := mgr.GetClient().Get(ctx, req.NamespacedName, rule); err != nil {
						return reconcile.Result{}, err
					}
					if len(rule.Spec.Hosts) == 1 && string(rule.Spec.Hosts[0]) == req.Name+"."+ns+".example.com" {
						reconciled <- req.Name
					}
					return reconcile.Result{}, nil
				}))
		},
	}
	logs := newLogView()
	runCtx, stop := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() {
		exited <- Run(runCtx, controller, Options{
			MetricsAddr: "0", ProbeAddr: "0", LogLevel: "info", ShutdownTimeout: 5 * time.Second,
			restConfig: testCfg, logOutput: processLogs,
		})
	}()

	// Both are reconciled, whole: the bad one without its status.
	pending := map[string]bool{"good": true, "bad": true}
	for len(pending) > 0 {
		select {
		case name := <-reconciled:
			delete(pending, name)
		case <-ctx.Done():
			t.Fatalf("not reconciled: %v\n%s", pending, logs)
		}
	}

	// The bad one is reported: a Warning Event on it and a log line.
	event := awaitEvent(t, ctx, ns, "bad")
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Action).To(Equal("StatusRemoved"))
	g.Expect(event.Note).To(ContainSubstring(`APIRule bad does not decode`))
	g.Expect(event.ReportingController).To(Equal("quarantinetest-controller"))

	stop()
	g.Expect(<-exited).To(Succeed())
	g.Expect(logs.String()).To(MatchRegexp(`"Quarantined an object that does not decode".*"namespace":"%s","name":"bad"`, ns))
}

// awaitEvent watches the namespace's events.k8s.io Events until one with
// reason UndecodableObject regards the named object.
func awaitEvent(t *testing.T, ctx context.Context, ns, name string) *eventsv1.Event {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testCfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended")
			}
			if e, isEvent := ev.Object.(*eventsv1.Event); isEvent && e.Reason == "UndecodableObject" && e.Regarding.Name == name {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("no UndecodableObject Event on %s/%s: %v", ns, name, ctx.Err())
		}
	}
}

// handOffTo puts the handoff's transform in front of every transform of a
// cache: each kind's own, and the default one, which the kinds without
// their own get.
func TestHandOffToEveryTransform(t *testing.T) {
	h := quarantine.NewHandoff(porticov1alpha1.GroupVersion.WithKind("APIRule"))
	mark := func(name string) toolscache.TransformFunc {
		return func(obj any) (any, error) {
			obj.(client.Object).SetLabels(map[string]string{"transform": name})
			return obj, nil
		}
	}
	own, none := &porticov1alpha1.APIRule{}, &corev1.Service{}
	opts := cache.Options{DefaultTransform: mark("default"), ByObject: map[client.Object]cache.ByObject{
		own: {Transform: mark("own")}, none: {},
	}}
	handOffTo(&opts, h)
	// A placeholder no handoff gave: only the handoff's transform knows it.
	placeholder := func() any {
		return &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{quarantine.HandedOff: "7"}}}
	}
	for name, transform := range map[string]toolscache.TransformFunc{"own": opts.ByObject[own].Transform, "default": opts.DefaultTransform} {
		if _, err := transform(placeholder()); err == nil {
			t.Errorf("the %s transform took a placeholder for an object", name)
		}
		out, err := transform(&porticov1alpha1.APIRule{})
		if err != nil || out.(client.Object).GetLabels()["transform"] != name {
			t.Errorf("the %s transform no longer runs: %v, %v", name, out, err)
		}
	}
	if opts.ByObject[none].Transform != nil {
		t.Error("a kind without a transform of its own got one: it would no longer get the default")
	}
}
