// Package groupversion holds what the API packages (api/*/v1alpha1) share
// to register their types with a runtime.Scheme. Like them it depends on
// k8s.io/apimachinery only, so the API stays cheap to import.
package groupversion

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NewSchemeBuilder returns the SchemeBuilder of an API package: it adds
// objs as the kinds of gv, with the meta/v1 options types of gv.
func NewSchemeBuilder(gv schema.GroupVersion, objs ...runtime.Object) runtime.SchemeBuilder {
	return runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(s, gv)
		return nil
	})
}
