package controller

import (
	"context"
	"fmt"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/certs"
)

// ClientCAConfigMap is the ConfigMap, in the gateway's namespace, into which
// the controller copies the checked client CA bundle; the gateway reads it.
const ClientCAConfigMap = operatorv1alpha1.DefaultGatewayClientCAConfigMap

// clientCA is the outcome of spec.gateway.clientCertificates: the mode the
// gateway is written with, and why it is not the one asked for.
type clientCA struct {
	// mode is what the gateway asks of clients now: the spec's mode once a
	// checked copy of the bundle is in place, "" while there is none.
	mode operatorv1alpha1.ClientCertificateMode
	// problem says why the spec's bundle was not copied ("" when it was).
	problem string
}

// clientCAProblem is the message of ReasonClientCAInvalid: the bundle named
// by the spec cannot be trusted as it is, so the copy is left as it was.
func clientCAProblem(c Config, source, why string, kept bool) string {
	msg := fmt.Sprintf("the client CA bundle %s (spec.gateway.clientCertificates.caBundle) %s", source, why)
	if kept {
		return msg + fmt.Sprintf("; the gateway keeps requiring client certificates (%s) of the CAs it had, in ConfigMap %s/%s", c.ClientMode, c.Namespace, ClientCAConfigMap)
	}
	return msg + "; the gateway asks clients for no certificate until it is fixed"
}

// syncClientCA checks the administrator's CA bundle and copies it into the
// controller's ConfigMap. The copy changes only to a bundle that checks
// (certs.ClientCABundle): a missing, unreadable or wrong bundle leaves the
// CAs and the requirement the gateway had, and is reported. Only the
// gateway's namespace is read: tenants cannot write there.
func (r *Reconciler) syncClientCA(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, now time.Time) (clientCA, error) {
	if c.ClientMode == "" {
		return clientCA{}, nil
	}
	if err := r.clientCANotShadowed(ctx, c.Namespace); err != nil {
		return clientCA{}, err
	}
	live := &corev1.ConfigMap{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ClientCAConfigMap}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return clientCA{}, err
	case !metav1.IsControlledBy(live, gw):
		return clientCA{}, &notOwnedError{"ConfigMap", c.Namespace + "/" + ClientCAConfigMap}
	}
	kept := live != nil && live.Data["ca.crt"] != ""
	keep := func(problem string) (clientCA, error) {
		out := clientCA{problem: problem}
		if kept {
			out.mode = c.ClientMode
		}
		return out, nil
	}
	source, data, why, err := r.readClientCA(ctx, c)
	if err != nil {
		return clientCA{}, err
	}
	if why != "" {
		return keep(clientCAProblem(c, source, why, kept))
	}
	bundle, err := certs.ClientCABundle(data, now)
	if err != nil {
		return keep(clientCAProblem(c, source, "cannot be used: "+err.Error(), kept))
	}
	if !kept || live.Data["ca.crt"] != string(bundle) {
		cm := &corev1.ConfigMap{ObjectMeta: objectMeta(gw, c.Namespace, ClientCAConfigMap), Data: map[string]string{"ca.crt": string(bundle)}}
		if live == nil {
			err = r.create(ctx, cm)
		} else {
			cm.ResourceVersion = live.ResourceVersion
			err = r.update(ctx, cm)
		}
		if err != nil {
			return clientCA{}, err
		}
	}
	return clientCA{mode: c.ClientMode}, nil
}

// readClientCA reads the ca.crt of the spec's bundle; why says what is
// wrong with it when it cannot be read ("" when it was).
func (r *Reconciler) readClientCA(ctx context.Context, c Config) (source string, data []byte, why string, err error) {
	var obj client.Object
	if name := c.ClientCA.ConfigMapName; name != "" {
		source, obj = fmt.Sprintf("ConfigMap %s/%s", c.Namespace, name), &corev1.ConfigMap{}
	} else {
		source, obj = fmt.Sprintf("Secret %s/%s", c.Namespace, c.ClientCA.SecretName), &corev1.Secret{}
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: c.ClientCA.ConfigMapName + c.ClientCA.SecretName}
	switch err := r.Reader.Get(ctx, key, obj); {
	case apierrors.IsNotFound(err):
		return source, nil, "does not exist", nil
	case apierrors.IsForbidden(err):
		value := "controllers.gateway.configMapNames"
		if c.ClientCA.SecretName != "" {
			value = "controllers.gateway.secretNames"
		}
		return source, nil, fmt.Sprintf("may not be read by the gateway controller: add its name to the Helm value %s", value), nil
	case err != nil:
		return source, nil, "", err
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		data = []byte(o.Data["ca.crt"])
	case *corev1.Secret:
		data = o.Data["ca.crt"]
	}
	if len(data) == 0 {
		return source, nil, "has no key ca.crt", nil
	}
	return source, data, "", nil
}

// clientCANotShadowed fails when a Secret has the name of the client CA
// ConfigMap: the gateway looks the name up as a Secret or a ConfigMap, and
// the controller cannot vouch for a Secret it did not write.
func (r *Reconciler) clientCANotShadowed(ctx context.Context, ns string) error {
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ClientCAConfigMap}, &corev1.Secret{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("check that no Secret %s/%s stands in for the client CA ConfigMap: %w", ns, ClientCAConfigMap, err)
	}
	return &notOwnedError{"Secret", ns + "/" + ClientCAConfigMap + " (the gateway could read it as its client CAs)"}
}

// removeClientCA deletes the copy once the gateway no longer reads it.
func (r *Reconciler) removeClientCA(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns string) error {
	return r.deleteOwned(ctx, gw, &corev1.ConfigMap{}, ns, ClientCAConfigMap)
}

// istioTooOldError: the cluster's Istio Gateway CRD has no
// tls.caCertCredentialName (Istio before 1.28), so the API server dropped it.
type istioTooOldError struct{ ref string }

func (e *istioTooOldError) Error() string {
	return fmt.Sprintf("Istio Gateway %s is stored without tls.caCertCredentialName: the cluster's Istio Gateway CRD does not know it (Istio 1.28 or later is needed for spec.gateway.clientCertificates); "+
		"the Gateway is left as it is, asking for client certificates of the CAs in its credential's ca.crt, until Istio is upgraded or clientCertificates removed", e.ref)
}

// caCredentialDropped reports whether live, the Istio Gateway as stored,
// asks for client certificates in desired's mode but lacks desired's
// tls.caCertCredentialName. The controller always writes the two together,
// so the API server dropped the field (an Istio CRD older than the field):
// writing again would only be dropped again, each write a watch event and
// another reconcile.
func caCredentialDropped(live, desired *networkingv1.Gateway) bool {
	for i, want := range desired.Spec.GetServers() {
		if want.GetTls().GetCaCertCredentialName() == "" || i >= len(live.Spec.GetServers()) {
			continue
		}
		got := live.Spec.GetServers()[i].GetTls()
		if got.GetMode() == want.GetTls().GetMode() && got.GetCaCertCredentialName() == "" {
			return true
		}
	}
	return false
}
