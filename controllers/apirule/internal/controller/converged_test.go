package controller

import (
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// convergedAndQuiet is what every feature asserts in both modes: the
// APIRule name becomes Ready, its live objects are what the translation
// wants (Golden; so the API server's defaulting does not make the
// controller write them again and again), and none of them is written
// again while it stays Ready.
func convergedAndQuiet(g Gomega, name string, selectors map[types.NamespacedName]map[string]string) {
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, name)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	}, eventually).Should(Succeed(), name)
	rule := &porticov1alpha1.APIRule{}
	get(g, name, rule)
	objs, _, err := Golden(rule, nil, selectors)
	g.Expect(err).NotTo(HaveOccurred())
	versions := map[string]string{}
	for _, want := range objs {
		live := want.DeepCopyObject().(client.Object)
		get(g, want.GetName(), live)
		g.Expect(upToDate(want, live)).To(BeTrue(), "%T %s has the desired spec", want, want.GetName())
		versions[objectID(live)] = live.GetResourceVersion()
	}
	g.Consistently(func(g Gomega) {
		for _, want := range objs {
			live := want.DeepCopyObject().(client.Object)
			get(g, want.GetName(), live)
			g.Expect(live.GetResourceVersion()).To(Equal(versions[objectID(live)]), "%T %s is written again", want, want.GetName())
		}
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed(), name)
}
