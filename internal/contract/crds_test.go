package contract

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(name string, conditions map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.Versions = versions
	for t, s := range conditions {
		c.Status.Conditions = append(c.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: t, Status: s})
	}
	return c
}

func served(name string) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true}
}

func TestUsable(t *testing.T) {
	established := map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus{apiextensionsv1.Established: apiextensionsv1.ConditionTrue}
	deleting := crd(APIRules.Name, established, served("v1alpha1"))
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := map[string]struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		"not installed":           {crd: nil},
		"established and serving": {crd: crd(APIRules.Name, established, served("v1alpha1")), want: true},
		"not yet established":     {crd: crd(APIRules.Name, nil, served("v1alpha1"))},
		"established False": {crd: crd(APIRules.Name, map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus{
			apiextensionsv1.Established: apiextensionsv1.ConditionFalse}, served("v1alpha1"))},
		"being deleted": {crd: deleting},
		"terminating condition": {crd: crd(APIRules.Name, map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus{
			apiextensionsv1.Established: apiextensionsv1.ConditionTrue, apiextensionsv1.Terminating: apiextensionsv1.ConditionTrue}, served("v1alpha1"))},
		"version not served": {crd: crd(APIRules.Name, established,
			apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1"}, served("v1beta1"))},
		"another version served": {crd: crd(APIRules.Name, established, served("v1"))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(APIRules.Usable(tc.crd)).To(Equal(tc.want))
		})
	}
}

func TestTransformCRDKeepsWhatStateOfReads(t *testing.T) {
	g := NewWithT(t)
	full := crd(VirtualServices.Name, map[apiextensionsv1.CustomResourceDefinitionConditionType]apiextensionsv1.ConditionStatus{
		apiextensionsv1.Established: apiextensionsv1.ConditionTrue, apiextensionsv1.NamesAccepted: apiextensionsv1.ConditionTrue}, served("v1"))
	full.Spec.Group, full.Spec.Names.Kind, full.Spec.Names.Plural = "networking.istio.io", "VirtualService", "virtualservices"
	full.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Description: "large"}}
	full.Annotations = map[string]string{"big": "annotation"}

	out, err := TransformCRD([]string{VirtualServices.Name})(full.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	kept := out.(*apiextensionsv1.CustomResourceDefinition)
	g.Expect(StateOf(kept)).To(Equal(StateOf(full)))
	g.Expect(VirtualServices.Usable(kept)).To(BeTrue())
	g.Expect(kept.Spec.Names.Kind).To(Equal("VirtualService"))
	g.Expect(kept.Spec.Versions[0].Schema).To(BeNil(), "schemas are dropped")
	g.Expect(kept.Annotations).To(BeEmpty())
	g.Expect(kept.Status.Conditions).To(HaveLen(1), "only Established and Terminating are kept")

	out, err = TransformCRD(nil)(full.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	other := out.(*apiextensionsv1.CustomResourceDefinition)
	g.Expect(other.Name).To(Equal(VirtualServices.Name))
	g.Expect(other.Spec.Versions).To(BeEmpty(), "an unwatched CRD keeps only its identity")

	same, err := TransformCRD(nil)("not a CRD")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(Equal("not a CRD"))
}
