package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// recordingQueue records the priority of every request added.
type recordingQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	added map[reconcile.Request]int
}

func (q *recordingQueue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

func (q *recordingQueue) AddWithOpts(o priorityqueue.AddOpts, rs ...reconcile.Request) {
	for _, r := range rs {
		q.added[r] = ptr.Deref(o.Priority, 0)
	}
}

// The Gateway's answer about one of the controller's routes goes ahead of
// the queue; a spec change of the route does not.
func TestRouteAnswersGoAheadOfTheQueue(t *testing.T) {
	g := NewWithT(t)
	route := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1, ResourceVersion: "1", Labels: map[string]string{
		plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "orders", plan.LabelAPIRuleNamespace: "shop",
	}}}
	answered := route.DeepCopy()
	answered.ResourceVersion = "2"
	answered.Status.Parents = []gwapiv1.RouteParentStatus{{ControllerName: "istio.io/gateway-controller"}}
	edited := route.DeepCopy()
	edited.Generation, edited.ResourceVersion = 2, "3"
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}

	h := routeEvents(mapper{})
	q := &recordingQueue{added: map[reconcile.Request]int{}}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: route, ObjectNew: answered}, q)
	g.Expect(q.added).To(Equal(map[reconcile.Request]int{want: answerPriority}))

	q = &recordingQueue{added: map[reconcile.Request]int{}}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: route, ObjectNew: edited}, q)
	g.Expect(q.added).To(HaveKeyWithValue(want, 0))
}
