package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

// Disabled or removed, the controller takes its finalizer off every
// APIRule (so they stay deletable) and leaves every other finalizer.
func TestRetireReleasesEveryAPIRule(t *testing.T) {
	g := NewWithT(t)
	rule := func(ns, name string, finalizers ...string) *porticov1alpha1.APIRule {
		return &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}}
	}
	objs := []client.Object{
		rule("team-a", "applied", Finalizer),
		rule("team-b", "held", "example.com/hold", Finalizer),
		rule("team-b", "refused"),
	}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme(schemeKinds...)).WithObjects(objs...).Build()
	g.Expect(Retire(context.Background(), c)).To(Succeed())
	for want, key := range map[string]client.ObjectKey{"": {Namespace: "team-a", Name: "applied"}, "example.com/hold": {Namespace: "team-b", Name: "held"}, "-": {Namespace: "team-b", Name: "refused"}} {
		got := &porticov1alpha1.APIRule{}
		g.Expect(c.Get(context.Background(), key, got)).To(Succeed())
		switch want {
		case "", "-":
			g.Expect(got.Finalizers).To(BeEmpty(), "%s", key)
		default:
			g.Expect(got.Finalizers).To(Equal([]string{want}), "%s", key)
		}
	}
}
