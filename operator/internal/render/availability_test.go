package render

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestDisruptionBudget(t *testing.T) {
	tests := map[string]struct {
		spec               operatorv1alpha1.ControllerSpec
		wantNone           bool
		wantMinAvailable   *intstr.IntOrString
		wantMaxUnavailable *intstr.IntOrString
	}{
		"one replica by default: none":          {wantNone: true},
		"one replica with a budget set: none":   {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](1), PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}}, wantNone: true},
		"scaled to zero: none":                  {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](0)}, wantNone: true},
		"two replicas, unset: maxUnavailable 1": {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](2)}, wantMaxUnavailable: ptr.To(intstr.FromInt32(1))},
		"minAvailable as a percentage": {
			spec:             operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](3), PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}},
			wantMinAvailable: ptr.To(intstr.FromString("50%")),
		},
		"maxUnavailable 2": {
			spec:               operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](5), PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}},
			wantMaxUnavailable: ptr.To(intstr.FromInt32(2)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			pdb := DisruptionBudget(input(tc.spec))
			g.Expect(WantsDisruptionBudget(tc.spec)).To(Equal(!tc.wantNone))
			if tc.wantNone {
				g.Expect(pdb).To(BeNil())
				return
			}
			g.Expect(pdb).NotTo(BeNil())
			g.Expect(*pdb.Name).To(Equal("apirule-controller"))
			g.Expect(*pdb.Namespace).To(Equal("portico-system"))
			g.Expect(pdb.Labels).To(Equal(Labels(operatorv1alpha1.ControllerAPIRule)))
			g.Expect(pdb.OwnerReferences).To(HaveLen(1))
			g.Expect(*pdb.OwnerReferences[0].Kind).To(Equal("APIGateway"))
			g.Expect(*pdb.OwnerReferences[0].UID).To(BeEquivalentTo("uid-1"))
			g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(SelectorLabels(operatorv1alpha1.ControllerAPIRule)),
				"the budget selects exactly the controller's pods, as its Deployment does")
			g.Expect(*pdb.Spec.UnhealthyPodEvictionPolicy).To(Equal(policyv1.AlwaysAllow))
			g.Expect(pdb.Spec.MinAvailable).To(Equal(tc.wantMinAvailable))
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(tc.wantMaxUnavailable))
		})
	}
}

func TestTopologySpreadAndPullSecrets(t *testing.T) {
	zone := corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}
	tests := map[string]struct {
		spec     operatorv1alpha1.ControllerSpec
		wantKeys []string
	}{
		"one replica: no spread":                     {},
		"two replicas: spread across nodes":          {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](2)}, wantKeys: []string{HostnameTopologyKey}},
		"the spec's constraints replace the default": {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](3), TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zone}}, wantKeys: []string{"topology.kubernetes.io/zone"}},
		"the spec's constraints with one replica":    {spec: operatorv1alpha1.ControllerSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zone}}, wantKeys: []string{"topology.kubernetes.io/zone"}},
		"an empty list turns the default off":        {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](3), TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			pod := Deployment(input(tc.spec)).Spec.Template.Spec
			var keys []string
			for _, c := range pod.TopologySpreadConstraints {
				keys = append(keys, *c.TopologyKey)
				g.Expect(c.LabelSelector.MatchLabels).To(Equal(SelectorLabels(operatorv1alpha1.ControllerAPIRule)))
			}
			g.Expect(keys).To(Equal(tc.wantKeys))
			if len(keys) > 0 && keys[0] == HostnameTopologyKey {
				c := pod.TopologySpreadConstraints[0]
				g.Expect(*c.MaxSkew).To(BeEquivalentTo(1))
				g.Expect(*c.WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway), "never leave a replica unscheduled for the spread")
			}
		})
	}

	t.Run("a constraint's own selector is kept", func(t *testing.T) {
		own := zone
		own.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		pod := Deployment(input(operatorv1alpha1.ControllerSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{own}})).Spec.Template.Spec
		NewWithT(t).Expect(pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels).To(Equal(map[string]string{"team": "a"}))
	})

	t.Run("pull secrets reach the pod in order", func(t *testing.T) {
		g := NewWithT(t)
		pod := Deployment(input(operatorv1alpha1.ControllerSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror"}, {Name: "backup"}}})).Spec.Template.Spec
		g.Expect(pod.ImagePullSecrets).To(HaveLen(2))
		g.Expect(*pod.ImagePullSecrets[0].Name).To(Equal("mirror"))
		g.Expect(*pod.ImagePullSecrets[1].Name).To(Equal("backup"))
		g.Expect(Deployment(input(operatorv1alpha1.ControllerSpec{})).Spec.Template.Spec.ImagePullSecrets).To(BeNil())
	})
}
