package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// consents reports whether the Service of another namespace than the
// APIRule's lets the APIRule route to it, read as svc with err: in Istio
// mode by its annotation, in HTTPRoute mode by a ReferenceGrant of its
// namespace (the Gateway API's way; the annotation does not count there,
// as the Gateway would not route without the grant). how says what
// consent would take. A Service that does not exist never consents; an
// error reading it is left to the caller.
func (r *Reconciler) consents(ctx context.Context, rule *porticov1alpha1.APIRule, parent *porticov1alpha1.ParentReference, svc *corev1.Service, err error) (bool, string, error) {
	ns, name := svc.Namespace, svc.Name
	how := fmt.Sprintf("its annotation %s must list %s, or be \"*\"", porticov1alpha1.AnnotationAllowedAPIRuleNamespaces, rule.Namespace)
	if parent != nil {
		how = fmt.Sprintf("in HTTPRoute mode a ReferenceGrant of the Service's namespace must allow HTTPRoutes of namespace %s to reach it", rule.Namespace)
	}
	if apierrors.IsNotFound(err) {
		return false, how, nil
	}
	if err != nil {
		return true, how, nil
	}
	if parent == nil {
		return permits(svc, rule.Namespace), how, nil
	}
	var grants gwapiv1beta1.ReferenceGrantList
	if err := r.Client.List(ctx, &grants, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false, how, fmt.Errorf("list the ReferenceGrants of namespace %s: %w", ns, err)
	}
	return referenceGranted(grants.Items, rule.Namespace, name), how, nil
}

// referenceGranted reports whether one of grants (all of the Service's
// namespace) lets HTTPRoutes of namespace from refer to the Service named
// service: a from entry for HTTPRoutes of that namespace and a to entry for
// core Services, of that name or of any name.
func referenceGranted(grants []gwapiv1beta1.ReferenceGrant, from, service string) bool {
	for i := range grants {
		g := &grants[i].Spec
		fromOK, toOK := false, false
		for _, f := range g.From {
			fromOK = fromOK || (f.Group == gwapiv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == from)
		}
		for _, t := range g.To {
			toOK = toOK || (t.Group == "" && t.Kind == "Service" && (t.Name == nil || string(*t.Name) == service))
		}
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// checkParent returns GatewayNotFound when the Gateway API Gateway the
// APIRule names does not exist (when its CRD is there to say so).
func (r *Reconciler) checkParent(ctx context.Context, parent *porticov1alpha1.ParentReference) (string, string) {
	if !r.Installed.GatewayAPIGateways {
		return "", ""
	}
	gw := &metav1.PartialObjectMetadata{}
	gw.SetGroupVersionKind(schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "Gateway"})
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: parent.Namespace, Name: parent.Name}, gw); apierrors.IsNotFound(err) {
		return porticov1alpha1.ReasonGatewayNotFound, fmt.Sprintf(
			"Gateway API Gateway %s/%s not found; the objects were left unchanged", parent.Namespace, parent.Name)
	}
	return "", ""
}
