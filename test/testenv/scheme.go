package testenv

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// Scheme is the one scheme of the tests: the types every Portico binary's
// scheme has (core, apps, apiextensions and operator.portico.dev, as the
// operator and controllers/internal/runner register them) and those of
// every AddToScheme function given, so that a test's scheme is its
// binary's. It panics on an error, which only a programming mistake makes.
func Scheme(addToScheme ...func(*kruntime.Scheme) error) *kruntime.Scheme {
	s := kruntime.NewScheme()
	builder := kruntime.NewSchemeBuilder(corev1.AddToScheme, appsv1.AddToScheme, apiextensionsv1.AddToScheme, operatorv1alpha1.AddToScheme)
	builder.Register(addToScheme...)
	if err := builder.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
