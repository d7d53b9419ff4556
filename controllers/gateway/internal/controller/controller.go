package controller

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/gateway/internal/certs"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/owned"
)

// Resync is how often the controller re-reads the Secrets it does not
// watch (it is not allowed to list Secrets): a deleted or replaced Secret is
// repaired, and a user's certificate re-checked, within this time.
const Resync = 2 * time.Minute

// ExpiryWarning is how long before expiry a certificate Portico does not
// renew (secretName) makes the state Warning.
const ExpiryWarning = 14 * 24 * time.Hour

// Reconciler runs the default gateway of the APIGateway.
type Reconciler struct {
	// Client reads the APIGateway, the controller's Gateways,
	// VirtualServices and Certificates and APIRules from the cache, and
	// writes.
	Client client.Client
	// Reader reads Secrets, ConfigMaps and same-named objects past the
	// cache, by name.
	Reader client.Reader
	// Clock is the time certificates are issued and checked at.
	Clock clock.PassiveClock
	// CertManager is true while cert-manager's Certificate CRD is usable.
	CertManager bool
	// APIRules is true while the APIRule CRD is usable.
	APIRules bool
	// GatewayAPI is true while the Gateway API's Gateway and HTTPRoute CRDs
	// are usable: the default gateway can be a Gateway API Gateway
	// (spec.gateway.gatewayAPI).
	GatewayAPI bool
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.portico.dev,resources=apigateways/status,verbs=get;patch
// +kubebuilder:rbac:groups=gateway.portico.dev,resources=apirules,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.istio.io,resources=gateways;virtualservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=get;list;watch;create;update;patch;delete
// Secrets and ConfigMaps only by the names it writes (any namespace: Istio's
// may come after Portico); create cannot be limited by name, but creating
// reads and overwrites nothing. A secretName Secret needs its name in the
// Helm value controllers.gateway.secretNames.
// The Secret portico-gateway-client-ca is only read: one of that name would
// stand in for the client CA ConfigMap. The administrator's client CA
// bundle needs its name in the Helm value controllers.gateway.configMapNames
// (or secretNames).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update;patch;delete,resourceNames=portico-gateway-tls;portico-gateway-ca;portico-gateway-cert-manager-tls
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,resourceNames=portico-gateway-client-ca
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;update;patch;delete,resourceNames=portico-gateway-ca;portico-gateway-client-ca
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=create

// Reconcile brings the default gateway to what the APIGateway asks for and
// reports it in status.gateway.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gw := &operatorv1alpha1.APIGateway{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, gw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !gw.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes what it owns
	}
	var st operatorv1alpha1.GatewayStatus
	var requeue time.Duration
	var err error
	if gw.Spec.Gateway.IsEnabled() {
		st, requeue, err = r.enabled(ctx, gw, ConfigFor(gw.Spec.Gateway))
	} else {
		st, err = r.disabled(ctx, gw)
	}
	st.ObservedGeneration = gw.Generation
	st.Message = contract.Truncate(st.Message, contract.MessageMaxLength)
	return ctrl.Result{RequeueAfter: requeue}, errors.Join(err, r.writeStatus(ctx, gw, st))
}

// notOwnedError is a same-named object the controller did not create.
type notOwnedError struct{ kind, ref string }

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("%s %s exists and was not created by Portico, so it is left alone: delete or rename it, or choose another spec.gateway.namespace", e.kind, e.ref)
}

// certificate is what a certificate source delivered.
type certificate struct {
	// valid is true when the source's Secret holds a certificate the
	// Gateway can serve now.
	valid bool
	info  certs.Info
	// state and reason when not Ready (Pending, Error), with message.
	state   operatorv1alpha1.GatewayState
	reason  string
	message string
	// next is when the source needs looking at again.
	next time.Time
}

func (r *Reconciler) enabled(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config) (operatorv1alpha1.GatewayStatus, time.Duration, error) {
	now := r.Clock.Now()
	st := operatorv1alpha1.GatewayStatus{Gateway: c.GatewayRef(), Hosts: c.Hosts(), GatewayAPI: c.GatewayAPI}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: c.Namespace}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		// Istio may come after Portico; its namespace's creation is not
		// watched, so look again every Resync.
		st.State, st.Reason = operatorv1alpha1.GatewayError, operatorv1alpha1.ReasonNamespaceNotFound
		st.Message = fmt.Sprintf("namespace %s (spec.gateway.namespace) does not exist: install Istio's ingress gateway there, or name the namespace its pods run in", c.Namespace)
		return st, Resync, nil
	}
	if c.GatewayAPI && !r.GatewayAPI {
		st.State, st.Reason = operatorv1alpha1.GatewayError, operatorv1alpha1.ReasonApplyFailed
		st.Message = fmt.Sprintf("spec.gateway.gatewayAPI is set but the Gateway API's CRDs %s and %s are not installed", contract.GatewayAPIGateways, contract.HTTPRoutes)
		return st, 0, nil
	}
	var live *networkingv1.Gateway
	if !c.GatewayAPI {
		live = &networkingv1.Gateway{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: operatorv1alpha1.DefaultGatewayName}, live)
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return failed(st, err), 0, err
		case !metav1.IsControlledBy(live, gw):
			return failed(st, &notOwnedError{"Istio Gateway", c.GatewayRef()}), Resync, nil
		}
	}

	var cert certificate
	var err error
	switch c.Source {
	case SourceSelfSigned:
		cert, err = r.selfSigned(ctx, gw, c, now)
	case SourceCertManager:
		cert, err = r.certManager(ctx, gw, c, now)
	default:
		cert, err = r.userSecret(ctx, c, now)
	}
	if err != nil {
		return failed(st, err), 0, ignoreNotOwned(err)
	}
	ca, err := r.syncClientCA(ctx, gw, c, now)
	if err != nil {
		return failed(st, err), 0, ignoreNotOwned(err)
	}
	credential, kept, pending := "", "", ""
	if c.GatewayAPI {
		credential, kept, pending, err = r.applyGatewayAPI(ctx, gw, c, cert, ca.mode)
	} else {
		credential, kept, err = r.applyIstio(ctx, gw, c, cert, live, now, ca.mode)
	}
	if err != nil {
		return failed(st, err), 0, ignoreNotOwned(err)
	}
	if err := r.removeUnused(ctx, gw, c, credential, ca); err != nil {
		return failed(st, err), 0, err
	}
	st.SecretName, st.ClientCertificates = credential, ca.mode
	if c.Source == SourceSelfSigned {
		st.CAConfigMap = operatorv1alpha1.DefaultGatewayName + "-ca"
	}
	if cert.valid {
		st.NotAfter = &metav1.Time{Time: cert.info.NotAfter}
	}
	switch {
	case !cert.valid:
		st.State, st.Reason, st.Message = cert.state, cert.reason, cert.message
		if kept != "" {
			st.Message += fmt.Sprintf("; the Gateway keeps serving the certificate in Secret %s/%s until then", c.Namespace, kept)
		}
	case ca.problem != "":
		st.State, st.Reason, st.Message = operatorv1alpha1.GatewayError, operatorv1alpha1.ReasonClientCAInvalid, ca.problem
	case pending != "":
		st.State, st.Reason, st.Message = operatorv1alpha1.GatewayPending, operatorv1alpha1.ReasonGatewayNotProgrammed, pending
	case c.Source == SourceSecretName && cert.info.NotAfter.Sub(now) < ExpiryWarning:
		st.State, st.Reason = operatorv1alpha1.GatewayWarning, operatorv1alpha1.ReasonCertificateExpiring
		st.Message = fmt.Sprintf("the certificate in Secret %s/%s expires at %s; Portico does not renew a secretName certificate: replace it", c.Namespace, c.SecretName, cert.info.NotAfter.UTC().Format(time.RFC3339))
	default:
		st.State, st.Reason = operatorv1alpha1.GatewayReady, operatorv1alpha1.ReasonGatewayReady
		st.Message = readyMessage(c, cert.info) + clientCAMessage(c, ca.mode)
	}
	return st, requeueAt(now, cert.next), nil
}

// removeUnused removes, once the gateway is written, what it no longer
// uses: the client CA copy (no client certificates asked for), earlier
// certificate sources' objects, and the default gateway left in other
// namespaces.
func (r *Reconciler) removeUnused(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, credential string, ca clientCA) error {
	if ca.mode == "" && ca.problem == "" {
		if err := r.removeClientCA(ctx, gw, c.Namespace); err != nil {
			return err
		}
	}
	if err := r.removeOtherSources(ctx, gw, c, credential); err != nil {
		return err
	}
	return r.removeStale(ctx, gw, c.Namespace)
}

// applyIstio writes the Istio Gateway and its health VirtualService and
// removes the Gateway API mode's objects; it returns the credential served
// and the one kept meanwhile ("" if none). The Gateway moves to the
// source's Secret only once it holds a valid certificate; until then it
// keeps serving the one it has, if that is still valid, so switching
// sources leaves no window without one.
func (r *Reconciler) applyIstio(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, cert certificate, live *networkingv1.Gateway, now time.Time,
	clientMode operatorv1alpha1.ClientCertificateMode,
) (string, string, error) {
	credential, kept := c.SecretName, ""
	if !cert.valid && live != nil {
		if current := credentialOf(live); current != "" && current != c.SecretName && r.servable(ctx, c, current, now) {
			credential, kept = current, current
		}
	}
	desired := DesiredGateway(gw, c, credential, clientMode)
	if live != nil && caCredentialDropped(live, desired) {
		return "", "", &istioTooOldError{c.GatewayRef()}
	}
	if err := r.apply(ctx, gw, live, desired); err != nil {
		return "", "", err
	}
	if err := r.applyHealth(ctx, gw, c); err != nil {
		return "", "", err
	}
	return credential, kept, r.removeGatewayAPIMode(ctx, gw, c.Namespace)
}

func readyMessage(c Config, info certs.Info) string {
	kind := "Istio Gateway"
	if c.GatewayAPI {
		kind = "Gateway API Gateway"
	}
	msg := fmt.Sprintf(kind+" %s serves *.%s over HTTPS (HTTP redirects) with the %s certificate in Secret %s/%s, valid until %s",
		c.GatewayRef(), c.Domain, c.Source, c.Namespace, c.SecretName, info.NotAfter.UTC().Format(time.RFC3339))
	if c.Source == SourceSelfSigned {
		msg += fmt.Sprintf("; clients trust the CA in ConfigMap %s/%s-ca (key ca.crt)", c.Namespace, operatorv1alpha1.DefaultGatewayName)
	}
	return msg
}

// clientCAMessage is what the Ready message says of client certificates.
func clientCAMessage(c Config, mode operatorv1alpha1.ClientCertificateMode) string {
	switch mode {
	case operatorv1alpha1.ClientCertificateRequired:
		return fmt.Sprintf("; clients must present a certificate of the CAs in ConfigMap %s/%s", c.Namespace, ClientCAConfigMap)
	case operatorv1alpha1.ClientCertificateOptional:
		return fmt.Sprintf("; clients may present a certificate of the CAs in ConfigMap %s/%s (Optional: one without is served too)", c.Namespace, ClientCAConfigMap)
	}
	return ""
}

// requeueAt is how long until next, at most Resync.
func requeueAt(now, next time.Time) time.Duration {
	if next.IsZero() {
		return Resync
	}
	return max(time.Second, min(Resync, next.Sub(now)))
}

func failed(st operatorv1alpha1.GatewayStatus, err error) operatorv1alpha1.GatewayStatus {
	st.State, st.Reason = operatorv1alpha1.GatewayError, operatorv1alpha1.ReasonApplyFailed
	var notOwned *notOwnedError
	switch {
	case errors.As(err, &notOwned):
		st.Reason = operatorv1alpha1.ReasonObjectNotOwned
	case apierrors.IsForbidden(err):
		st.Message = fmt.Sprintf("%v (the gateway controller may read only the Secrets it writes and those named in the Helm value controllers.gateway.secretNames: add a secretName there)", err)
		return st
	}
	st.Message = err.Error()
	return st
}

func ignoreNotOwned(err error) error {
	var notOwned *notOwnedError
	if errors.As(err, &notOwned) {
		return nil // reported in status; retrying will not help
	}
	return err
}

func credentialOf(g *networkingv1.Gateway) string {
	for _, s := range g.Spec.GetServers() {
		if s.GetTls().GetCredentialName() != "" {
			return s.GetTls().GetCredentialName()
		}
	}
	return ""
}

// servable reports whether Secret ns/name holds a certificate valid for the
// domain now.
func (r *Reconciler) servable(ctx context.Context, c Config, name string, now time.Time) bool {
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		return false
	}
	_, err := certs.Check(pairOf(s), c.Domain, now)
	return err == nil
}

func pairOf(s *corev1.Secret) certs.Pair {
	if s == nil {
		return certs.Pair{}
	}
	return certs.Pair{CertPEM: s.Data[corev1.TLSCertKey], KeyPEM: s.Data[corev1.TLSPrivateKeyKey]}
}

// selfSigned keeps a CA and a serving certificate signed by it in
// Secrets, and the CA (with the previous one while it is valid, so clients
// that refresh their trust in time see no gap) in a ConfigMap.
func (r *Reconciler) selfSigned(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, now time.Time) (certificate, error) {
	caSecret, err := r.ownedSecret(ctx, gw, c.Namespace, CASecret)
	if err != nil {
		return certificate{}, err
	}
	serving, err := r.ownedSecret(ctx, gw, c.Namespace, SelfSignedSecret)
	if err != nil {
		return certificate{}, err
	}
	ca, pair := pairOf(caSecret), pairOf(serving)
	plan := certs.Plan(ca, pair, c.Domain, c.Validity.Duration, now)
	if plan.NewCA || plan.NewServing {
		if ca, pair, err = certs.Apply(plan, ca, pair, c.Domain, c.Validity.Duration, now); err != nil {
			return certificate{}, err
		}
	}
	if plan.NewCA {
		if err := r.writeSecret(ctx, gw, caSecret, c.Namespace, CASecret, corev1.SecretTypeTLS, map[string][]byte{
			corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM,
		}); err != nil {
			return certificate{}, err
		}
	}
	if plan.NewCA || plan.NewServing {
		if err := r.writeSecret(ctx, gw, serving, c.Namespace, SelfSignedSecret, corev1.SecretTypeTLS, map[string][]byte{
			corev1.TLSCertKey: pair.CertPEM, corev1.TLSPrivateKeyKey: pair.KeyPEM, "ca.crt": ca.CertPEM,
		}); err != nil {
			return certificate{}, err
		}
	}
	if err := r.publishCA(ctx, gw, c.Namespace, ca.CertPEM, now); err != nil {
		return certificate{}, err
	}
	info, err := certs.Check(pair, c.Domain, now)
	if err != nil {
		return certificate{}, fmt.Errorf("the certificate just issued does not check: %w", err)
	}
	return certificate{valid: true, info: info, next: plan.NextCheck}, nil
}

// publishCA writes the ConfigMap clients trust: the current CA first, then
// the previous ones still valid.
func (r *Reconciler) publishCA(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns string, current []byte, now time.Time) error {
	live := &corev1.ConfigMap{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: CASecret}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(live, gw):
		return &notOwnedError{"ConfigMap", ns + "/" + CASecret}
	}
	bundle := bytes.Clone(current)
	if live != nil {
		bundle = append(bundle, stillValid([]byte(live.Data["ca.crt"]), current, now)...)
	}
	if live != nil && live.Data["ca.crt"] == string(bundle) {
		return nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: objectMeta(gw, ns, CASecret), Data: map[string]string{"ca.crt": string(bundle)}}
	if live == nil {
		return r.create(ctx, cm)
	}
	cm.ResourceVersion = live.ResourceVersion
	return r.update(ctx, cm)
}

// stillValid returns the PEM certificates of bundle other than current that
// have not expired at now.
func stillValid(bundle, current []byte, now time.Time) []byte {
	var out []byte
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" || bytes.Contains(current, pem.EncodeToMemory(block)) {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil && now.Before(cert.NotAfter) {
			out = append(out, pem.EncodeToMemory(block)...)
		}
	}
}

// ownedSecret reads a Secret the controller writes: nil when absent, an
// error when someone else's holds the name.
func (r *Reconciler) ownedSecret(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(s, gw):
		return nil, &notOwnedError{"Secret", ns + "/" + name}
	}
	return s, nil
}

func (r *Reconciler) writeSecret(ctx context.Context, gw *operatorv1alpha1.APIGateway, live *corev1.Secret, ns, name string, typ corev1.SecretType, data map[string][]byte) error {
	s := &corev1.Secret{ObjectMeta: objectMeta(gw, ns, name), Type: typ, Data: data}
	if live == nil {
		return r.create(ctx, s)
	}
	if live.Type != typ { // the type is immutable
		if err := r.delete(ctx, live); client.IgnoreNotFound(err) != nil {
			return err
		}
		return r.create(ctx, s)
	}
	s.ResourceVersion = live.ResourceVersion
	return r.update(ctx, s)
}

// certManager keeps the cert-manager Certificate and checks the Secret
// cert-manager writes.
func (r *Reconciler) certManager(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, now time.Time) (certificate, error) {
	if !r.CertManager {
		return certificate{state: operatorv1alpha1.GatewayPending, reason: operatorv1alpha1.ReasonCertificatePending,
			message: "cert-manager's " + contract.Certificates.String() + " CRD is not usable yet"}, nil
	}
	desired := DesiredCertificate(gw, c)
	live := &cmv1.Certificate{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.create(ctx, desired); err != nil {
			return certificate{}, err
		}
		live = desired
	case err != nil:
		return certificate{}, err
	case !metav1.IsControlledBy(live, gw):
		return certificate{}, &notOwnedError{"cert-manager Certificate", c.Namespace + "/" + desired.Name}
	case !equalCertificateSpec(&live.Spec, &desired.Spec):
		live.Spec = desired.Spec
		if err := r.update(ctx, live); err != nil {
			return certificate{}, err
		}
	}
	ready, why := CertificateReady(live)
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: CertManagerSecret}, s); err != nil {
		if !apierrors.IsNotFound(err) {
			return certificate{}, err
		}
		s = nil
	}
	info, checkErr := certs.Check(pairOf(s), c.Domain, now)
	if ready && checkErr == nil {
		return certificate{valid: true, info: info}, nil
	}
	msg := fmt.Sprintf("waiting for cert-manager to issue Certificate %s/%s (issuer %s %s): %s", c.Namespace, desired.Name, c.IssuerRef.Kind, c.IssuerRef.Name, why)
	if ready && checkErr != nil {
		msg = fmt.Sprintf("cert-manager reports Certificate %s/%s Ready but Secret %s does not check: %v", c.Namespace, desired.Name, CertManagerSecret, checkErr)
	}
	return certificate{state: operatorv1alpha1.GatewayPending, reason: operatorv1alpha1.ReasonCertificatePending, message: msg}, nil
}

func equalCertificateSpec(a, b *cmv1.CertificateSpec) bool {
	return a.SecretName == b.SecretName && slices.Equal(a.DNSNames, b.DNSNames) && a.IssuerRef == b.IssuerRef &&
		a.PrivateKey != nil && b.PrivateKey != nil && *a.PrivateKey == *b.PrivateKey &&
		a.SecretTemplate != nil && fmt.Sprint(a.SecretTemplate.Labels) == fmt.Sprint(b.SecretTemplate.Labels)
}

// userSecret checks the user's Secret; it is never written.
func (r *Reconciler) userSecret(ctx context.Context, c Config, now time.Time) (certificate, error) {
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.SecretName}, s); err != nil {
		if !apierrors.IsNotFound(err) {
			return certificate{}, err
		}
		return certificate{state: operatorv1alpha1.GatewayError, reason: operatorv1alpha1.ReasonCertificateInvalid,
			message: fmt.Sprintf("Secret %s/%s (spec.gateway.certificate.secretName) not found", c.Namespace, c.SecretName)}, nil
	}
	info, err := certs.Check(pairOf(s), c.Domain, now)
	if err != nil {
		return certificate{state: operatorv1alpha1.GatewayError, reason: operatorv1alpha1.ReasonCertificateInvalid,
			message: fmt.Sprintf("Secret %s/%s (spec.gateway.certificate.secretName): %v", c.Namespace, c.SecretName, err)}, nil
	}
	return certificate{valid: true, info: info, next: info.NotAfter.Add(-ExpiryWarning)}, nil
}

// apply creates the Gateway or updates the controller's own.
func (r *Reconciler) apply(ctx context.Context, gw *operatorv1alpha1.APIGateway, live, desired *networkingv1.Gateway) error {
	var liveObj client.Object
	if live != nil {
		liveObj = live
	}
	return r.write(ctx, gw, "Istio Gateway", desired, liveObj)
}

func (r *Reconciler) applyHealth(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config) error {
	return r.applyNamed(ctx, gw, "VirtualService", DesiredHealth(gw, c))
}

// applyNamed writes desired after reading its name past the cache: a
// same-named object the controller did not create is a notOwnedError, with
// kind as the message names it.
func (r *Reconciler) applyNamed(ctx context.Context, gw *operatorv1alpha1.APIGateway, kind string, desired client.Object) error {
	live := written.Of(desired).New()
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(live, gw):
		return &notOwnedError{kind, desired.GetNamespace() + "/" + desired.GetName()}
	}
	return r.write(ctx, gw, kind, desired, live)
}

// write creates desired when live is nil, or updates live, which the
// caller found to be the controller's, when its spec, labels or owner
// differ (the write path of package owned). A same-named object that
// appeared meanwhile and is not the controller's is a notOwnedError, with
// kind as the message names it.
func (r *Reconciler) write(ctx context.Context, gw *operatorv1alpha1.APIGateway, kind string, desired, live client.Object) error {
	_, conflict, err := r.writer().Write(ctx, owned.ControlledBy(gw, ""), desired, live)
	if conflict != "" {
		return &notOwnedError{kind, desired.GetNamespace() + "/" + desired.GetName()}
	}
	return err
}

// removeOtherSources deletes what earlier certificate sources left in the
// namespace, except the Secret the Gateway serves and the selfSigned CA.
func (r *Reconciler) removeOtherSources(ctx context.Context, gw *operatorv1alpha1.APIGateway, c Config, credential string) error {
	var errs []error
	// The selfSigned CA stays while the gateway does: clients that trust it
	// keep doing so if the gateway switches back.
	if c.Source != SourceSelfSigned && credential != SelfSignedSecret {
		errs = append(errs, r.deleteOwned(ctx, gw, &corev1.Secret{}, c.Namespace, SelfSignedSecret))
	}
	if c.Source != SourceCertManager && credential != CertManagerSecret && r.CertManager {
		errs = append(errs, r.deleteOwned(ctx, gw, &cmv1.Certificate{}, c.Namespace, operatorv1alpha1.DefaultGatewayName),
			r.deleteOwned(ctx, gw, &corev1.Secret{}, c.Namespace, CertManagerSecret))
	}
	return errors.Join(errs...)
}

// deleteOwned deletes ns/name of obj's kind if the controller created it.
// cert-manager's Secret counts as created by it when it carries the
// controller's label (cert-manager copies it from the secretTemplate).
func (r *Reconciler) deleteOwned(ctx context.Context, gw *operatorv1alpha1.APIGateway, obj client.Object, ns, name string) error {
	controlled := owned.ControlledBy(gw, "")
	owns := func(obj client.Object) bool {
		issuedForUs := name == CertManagerSecret && obj.GetLabels()[LabelManagedBy] == ManagedBy
		return controlled(obj) || issuedForUs
	}
	return r.writer().Remove(ctx, owns, obj, client.ObjectKey{Namespace: ns, Name: name})
}

// removeStale removes the default gateway the controller left in other
// namespaces (spec.gateway.namespace changed), unless APIRules name it.
func (r *Reconciler) removeStale(ctx context.Context, gw *operatorv1alpha1.APIGateway, keep string) error {
	gateways, err := r.ownedGateways(ctx, gw)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range gateways {
		if g.Namespace == keep {
			continue
		}
		users, err := r.users(ctx, g.Namespace+"/"+g.Name, false)
		if err != nil || len(users) > 0 {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, r.removeAll(ctx, gw, g.Namespace))
	}
	return errors.Join(errs...)
}

// removeAll deletes every object of the default gateway in namespace ns.
func (r *Reconciler) removeAll(ctx context.Context, gw *operatorv1alpha1.APIGateway, ns string) error {
	errs := []error{
		r.deleteOwned(ctx, gw, &networkingv1.Gateway{}, ns, operatorv1alpha1.DefaultGatewayName),
		r.deleteOwned(ctx, gw, &networkingv1.VirtualService{}, ns, HealthVirtualService),
		r.deleteOwned(ctx, gw, &corev1.Secret{}, ns, SelfSignedSecret),
		r.deleteOwned(ctx, gw, &corev1.Secret{}, ns, CASecret),
		r.deleteOwned(ctx, gw, &corev1.ConfigMap{}, ns, CASecret),
		r.removeClientCA(ctx, gw, ns),
	}
	if r.CertManager {
		errs = append(errs, r.deleteOwned(ctx, gw, &cmv1.Certificate{}, ns, operatorv1alpha1.DefaultGatewayName),
			r.deleteOwned(ctx, gw, &corev1.Secret{}, ns, CertManagerSecret))
	}
	errs = append(errs, r.removeGatewayAPIMode(ctx, gw, ns))
	return errors.Join(errs...)
}

// ownedGateway is a default gateway the controller wrote, of either kind.
type ownedGateway struct {
	types.NamespacedName
	hosts      []string
	secret     string
	gatewayAPI bool
}

// ownedGateways lists the default gateways (Istio's and, with their CRD,
// the Gateway API's) the controller wrote for gw, in any namespace.
func (r *Reconciler) ownedGateways(ctx context.Context, gw *operatorv1alpha1.APIGateway) ([]ownedGateway, error) {
	var out []ownedGateway
	istio := &networkingv1.GatewayList{}
	if err := r.Client.List(ctx, istio, client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return nil, err
	}
	for _, g := range istio.Items {
		if g.Name == operatorv1alpha1.DefaultGatewayName && metav1.IsControlledBy(g, gw) {
			out = append(out, ownedGateway{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name},
				hosts: g.Spec.GetServers()[0].GetHosts(), secret: credentialOf(g)})
		}
	}
	if !r.GatewayAPI {
		return out, nil
	}
	api := &gwapiv1.GatewayList{}
	if err := r.Client.List(ctx, api, client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		return nil, err
	}
	for i := range api.Items {
		g := &api.Items[i]
		if g.Name != operatorv1alpha1.DefaultGatewayName || !metav1.IsControlledBy(g, gw) {
			continue
		}
		o := ownedGateway{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}, secret: gatewayAPICredential(g), gatewayAPI: true}
		if len(g.Spec.Listeners) > 0 && g.Spec.Listeners[0].Hostname != nil {
			o.hosts = []string{string(*g.Spec.Listeners[0].Hostname)}
		}
		out = append(out, o)
	}
	return out, nil
}

// users lists the APIRules, as namespace/name, that use gateway ref: name
// it, or (withDefault) name no gateway.
func (r *Reconciler) users(ctx context.Context, ref string, withDefault bool) ([]string, error) {
	if !r.APIRules {
		return nil, nil
	}
	list := &porticov1alpha1.APIRuleList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list APIRules: %w", err)
	}
	var users []string
	for _, rule := range list.Items {
		parent := ""
		if p := rule.Spec.ParentRef; p != nil {
			ns := p.Namespace
			if ns == "" {
				ns = rule.Namespace
			}
			parent = ns + "/" + p.Name
		}
		if rule.Spec.Gateway == ref || parent == ref || (withDefault && rule.Spec.Gateway == "" && rule.Spec.ParentRef == nil) {
			users = append(users, rule.Namespace+"/"+rule.Name)
		}
	}
	return users, nil
}

// disabled removes the default gateway once no APIRule uses it.
func (r *Reconciler) disabled(ctx context.Context, gw *operatorv1alpha1.APIGateway) (operatorv1alpha1.GatewayStatus, error) {
	gateways, err := r.ownedGateways(ctx, gw)
	if err != nil {
		return failed(operatorv1alpha1.GatewayStatus{}, err), err
	}
	var errs []error
	for _, g := range gateways {
		ref := g.Namespace + "/" + g.Name
		users, err := r.users(ctx, ref, true)
		if err != nil {
			return failed(operatorv1alpha1.GatewayStatus{Gateway: ref}, err), err
		}
		if len(users) > 0 {
			return operatorv1alpha1.GatewayStatus{
				State: operatorv1alpha1.GatewayWarning, Reason: operatorv1alpha1.ReasonGatewayInUse, Gateway: ref, GatewayAPI: g.gatewayAPI,
				Hosts: g.hosts, SecretName: g.secret,
				Message: InUseMessage(ref, users, contract.MessageMaxLength),
			}, nil
		}
		errs = append(errs, r.removeAll(ctx, gw, g.Namespace))
	}
	if err := errors.Join(errs...); err != nil {
		return failed(operatorv1alpha1.GatewayStatus{}, err), err
	}
	return operatorv1alpha1.GatewayStatus{State: operatorv1alpha1.GatewayDisabled, Reason: operatorv1alpha1.ReasonNotConfigured,
		Message: "no default gateway: spec.gateway is not set or not enabled"}, nil
}

// writeStatus patches status.gateway alone; the rest of the status is the
// operator's.
func (r *Reconciler) writeStatus(ctx context.Context, gw *operatorv1alpha1.APIGateway, st operatorv1alpha1.GatewayStatus) error {
	if gw.Status.Gateway != nil && equalStatus(*gw.Status.Gateway, st) {
		return nil
	}
	patched := gw.DeepCopy()
	patched.Status.Gateway = &st
	if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(gw)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write status.gateway: %w", err)
	}
	return nil
}

func equalStatus(a, b operatorv1alpha1.GatewayStatus) bool {
	an, bn := a.NotAfter, b.NotAfter
	a.NotAfter, b.NotAfter = nil, nil
	sameTime := (an == nil) == (bn == nil) && (an == nil || an.Unix() == bn.Unix())
	return sameTime && fmt.Sprint(a) == fmt.Sprint(b)
}
