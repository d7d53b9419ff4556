package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/internal/fairqueue"
)

func version(uid, rv string) *networkingv1.VirtualService {
	return &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{
		Name: "orders", Namespace: ns, UID: types.UID(uid), ResourceVersion: rv,
		Labels: map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "orders", plan.LabelAPIRuleNamespace: ns},
	}}
}

func TestOwnWritesTake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written client.Object
		event   client.Object
		own     bool
	}{
		{name: "the version written", written: version("a", "5"), event: version("a", "5"), own: true},
		{name: "a later version (another's edit)", written: version("a", "5"), event: version("a", "6")},
		{name: "another object of the same name", written: version("a", "5"), event: version("b", "5")},
		{name: "nothing written", event: version("a", "5")},
		{name: "a write without a version is not recorded", written: version("a", ""), event: version("a", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var w ownWrites
			if tc.written != nil {
				w.add(tc.written)
			}
			g.Expect(w.take(tc.event)).To(Equal(tc.own))
			g.Expect(w.take(tc.event)).To(BeFalse(), "a write is taken once")
		})
	}
}

// An event that comes while its object's write is under way waits for the
// write's outcome.
func TestOwnWritesEventBeforeResponse(t *testing.T) {
	g := NewWithT(t)
	var w ownWrites
	w.begin(version("", ""))
	taken := make(chan bool)
	go func() { taken <- w.take(version("a", "7")) }()
	g.Consistently(taken, "100ms").ShouldNot(Receive())
	w.end(version("a", "7"), true)
	g.Eventually(taken).Should(Receive(BeTrue()))

	w.begin(version("", ""))
	go func() { taken <- w.take(version("a", "8")) }()
	w.end(version("", ""), false)
	g.Eventually(taken).Should(Receive(BeFalse()), "a failed write records nothing")
}

// The controller's own write of an object does not requeue its APIRule;
// the other APIRules the handler maps the event to, and others' writes,
// still do.
func TestExceptOwner(t *testing.T) {
	other := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: otherNS, Name: "neighbour"}}
	inner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return append(toAPIRuleRequests(o), other)
	})
	for _, tc := range []struct {
		name  string
		event func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		want  int
	}{
		{name: "own create", want: 1, event: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), event.CreateEvent{Object: version("a", "5")}, q)
		}},
		{name: "own update", want: 1, event: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: version("a", "4"), ObjectNew: version("a", "5")}, q)
		}},
		{name: "another's update", want: 2, event: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: version("a", "5"), ObjectNew: version("a", "6")}, q)
		}},
		{name: "a deletion", want: 2, event: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(context.Background(), event.DeleteEvent{Object: version("a", "5")}, q)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var w ownWrites
			w.add(version("a", "5"))
			q := fairqueue.ByNamespace("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.event(w.exceptOwner(inner), q)
			g.Eventually(q.Len).Should(Equal(tc.want))
			g.Consistently(q.Len, 50*time.Millisecond).Should(Equal(tc.want))
		})
	}
}

// The APIRule's own finalizer and status writes start no reconcile; any
// other update does.
func TestNotOwnWrite(t *testing.T) {
	g := NewWithT(t)
	var w ownWrites
	p := w.notOwnWrite()
	w.add(version("a", "5"))
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: version("a", "4"), ObjectNew: version("a", "5")})).To(BeFalse())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: version("a", "5"), ObjectNew: version("a", "6")})).To(BeTrue())
	g.Expect(p.Create(event.CreateEvent{Object: version("a", "5")})).To(BeTrue())
	g.Expect(p.Delete(event.DeleteEvent{Object: version("a", "5")})).To(BeTrue())
}
