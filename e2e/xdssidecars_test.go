//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// The backends' sidecars programmed by istiod (issue 44 item 2). On the
// node target every backend of the user stories (an agentDeployment whose
// role is backend) runs as `e2e-agent backend --xds <istiod>`: a sidecar
// node of its own pod (the downward API's POD_IP, POD_NAME, namespace and
// ServiceAccount, the pod's labels), which puts every request through the
// RBAC, jwt_authn and ext_authz filters istiod computed for its inbound
// port from the AuthorizationPolicies and RequestAuthentications Portico
// wrote. A request Istio's sidecar would refuse is refused: 401 for a bad
// token, 403 for what RBAC denies. Each backend runs with a ServiceAccount
// of its own, which may list pods in its own namespace and the gateway's
// and nowhere else: the imitated mutual-TLS peer identity (the peer pod's
// ServiceAccount) is looked for only there, which covers every peer the
// stories have (the gateway stand-ins; a host process such as Traefik has
// no pod and so no identity, as a plain-text client of a permissive
// sidecar has none).

// sidecarXDSEnv chooses the backends: unset or "istiod", the node
// target's backends take their configuration from the node e2e's istiod;
// "off", they enforce nothing (as before, and as on the other targets,
// which run no istiod); any other value is an xDS address host:port.
const sidecarXDSEnv = "E2E_SIDECAR_XDS"

// peerIdentityRole may list pods: bound, in the gateway's namespace and
// its own, to each backend's ServiceAccount.
const peerIdentityRole = "portico-e2e-peer-identity"

// sidecarXDSAddress is the xDS address the backends take their sidecar
// configuration from, "" when they enforce nothing.
func sidecarXDSAddress() string {
	switch v := os.Getenv(sidecarXDSEnv); v {
	case "off":
		return ""
	case "", "istiod":
		if istiodNodeIP == "" {
			return "" // no istiod: not the node target
		}
		return istiodXDSAddress()
	default:
		return v
	}
}

// sidecarsEnforce is true when the suite's backends run behind sidecar
// stand-ins that enforce what istiod computed from the access policies:
// then explain's backend half (routed, 401, 403) is compared too.
func sidecarsEnforce() bool { return sidecarXDSAddress() != "" }

// sidecarPeerNamespaces are the namespaces where a backend of namespace ns
// looks for its peers' pods.
func sidecarPeerNamespaces(ns string) []string {
	return slices.Compact(slices.Sorted(slices.Values([]string{gatewayNamespace, ns})))
}

// withXDSSidecar is agentDeployment's hook: a backend becomes a sidecar
// node of its pod programmed by istiod, with a ServiceAccount of its own
// (the Deployment's name unless the story chose one) and its token; other
// roles, and every Deployment when sidecarXDSAddress is "", are left as
// they are. createOrExisting gives the ServiceAccount its objects
// (ensureSidecarIdentity).
func withXDSSidecar(d *appsv1.Deployment) *appsv1.Deployment {
	addr := sidecarXDSAddress()
	c := &d.Spec.Template.Spec.Containers[0]
	if addr == "" || len(c.Args) == 0 || c.Args[0] != "backend" {
		return d
	}
	spec := &d.Spec.Template.Spec
	if spec.ServiceAccountName == "" || spec.ServiceAccountName == "default" {
		spec.ServiceAccountName = d.Name
	}
	spec.AutomountServiceAccountToken = ptr.To(true)
	c.Args = append(c.Args, "--xds", addr, "--peer-identity", "pods",
		"--peer-namespaces", strings.Join(sidecarPeerNamespaces(d.Namespace), ","))
	if !slices.Contains(c.Args, "--workload-labels") {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(d.Spec.Template.Labels)) {
			kv = append(kv, k+"="+d.Spec.Template.Labels[k])
		}
		c.Args = append(c.Args, "--workload-labels", strings.Join(kv, ","))
	}
	return withProxyIdentity(d)
}

// isXDSBackend: d's agent is a backend programmed over xDS.
func isXDSBackend(d *appsv1.Deployment) bool {
	c := d.Spec.Template.Spec.Containers
	return len(c) > 0 && len(c[0].Args) > 0 && c[0].Args[0] == "backend" && slices.Contains(c[0].Args, "--xds")
}

// ensureSidecarIdentity gives an xDS backend's ServiceAccount what the
// sidecar stand-in needs before its Deployment is created: the account,
// and the right to list pods (for the peer's identity) in the namespaces
// it looks in, nothing else. Other objects are left alone.
func ensureSidecarIdentity(ctx context.Context, obj client.Object) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !isXDSBackend(d) {
		return
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	createOrExisting(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: d.Namespace}})
	for _, ns := range sidecarPeerNamespaces(d.Namespace) {
		createOrExisting(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: peerIdentityRole, Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
		})
		createOrExisting(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: peerIdentityRole + "-" + d.Namespace + "-" + sa, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: peerIdentityRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: d.Namespace}},
		})
	}
}

// tokenIssuer is an OpenID-style token issuer of the suite's: its key set
// served over HTTPS on the node's address (istiod fetches it, trusting
// the issuer's CA through SSL_CERT_FILE), and the keys that sign tokens.
type tokenIssuer struct {
	// url is the issuer (its iss claim) and jwks its key set's URI.
	url, jwks string
	key       *ecdsa.PrivateKey
	// trust is the PEM file of the CA of the key set's certificate.
	trust string
}

// suiteIssuer is the node target's token issuer (startTokenIssuer).
var suiteIssuer *tokenIssuer

// startTokenIssuer serves a key set of one ECDSA key on https://ip:port
// (a free port) with a certificate of a CA of its own, written to
// dir/token-issuer-ca.pem; it returns that file, for istiod's
// SSL_CERT_FILE.
func startTokenIssuer(dir, ip string) string {
	ca := newClientAuthority("Portico e2e token issuer CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: ip}, IPAddresses: []net.IP{net.ParseIP(ip)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, &serverKey.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "e2e-1", Algorithm: string(jose.ES256), Use: "sig"}}})
	Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	Expect(err).NotTo(HaveOccurred())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: serverKey}},
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	url := "https://" + ln.Addr().String()
	trust := filepath.Join(dir, "token-issuer-ca.pem")
	Expect(os.WriteFile(trust, ca.pem, 0o600)).To(Succeed())
	suiteIssuer = &tokenIssuer{url: url, jwks: url + "/jwks.json", key: key, trust: trust}
	return trust
}

// sign is a token of the issuer's (or, with key, of another key's) for
// subject sub, audiences aud, expiring at exp.
func (i *tokenIssuer) sign(key *ecdsa.PrivateKey, sub string, aud []string, exp time.Time) string {
	return i.signAs(i.url, key, sub, aud, exp)
}

// signAs is sign with another issuer claim.
func (i *tokenIssuer) signAs(issuer string, key *ecdsa.PrivateKey, sub string, aud []string, exp time.Time) string {
	if key == nil {
		key = i.key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "e2e-1"))
	Expect(err).NotTo(HaveOccurred())
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: issuer, Subject: sub, Audience: aud,
		IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute)), Expiry: jwt.NewNumericDate(exp)}).Serialize()
	Expect(err).NotTo(HaveOccurred())
	return tok
}

// sidecarReport adds a line to e2e/_artifacts/sidecars-report.txt.
func sidecarReport(format string, args ...any) {
	reportTo("sidecars-report.txt", format, args...)
}

// sidecarTokenSpecs is the story of a JWT-protected API whose tokens only
// the backend's sidecar checks, as Istio's does: Portico's
// RequestAuthentication and AuthorizationPolicy, turned by istiod into
// jwt_authn and RBAC filters, let a valid token with the right audience
// through and refuse a missing (403), forged or expired (401) or
// wrong-audience (403) one; a token of the orders rule's issuer, whose key
// set (https://idp.example.com) istiod cannot fetch, is refused (401): istiod
// fails closed, and explain (comparing every request) says so too. Call it inside the Portico Describe after the
// routing spec (the orders backend and the gateway stand-in).
func sidecarTokenSpecs(gatewayIP *string) {
	const host = "accounts.example.com"
	It("lets a valid token through the backend's sidecar, programmed by istiod, and refuses a missing, forged, expired or wrong-audience one, and every token of an issuer whose key set istiod cannot fetch", func(ctx SpecContext) {
		if !sidecarsEnforce() || suiteIssuer == nil {
			Skip("the backends' sidecars are programmed by the node target's istiod (" + sidecarXDSEnv + " not off)")
		}
		accounts := &gatewayv1alpha1.APIRule{
			ObjectMeta: metav1.ObjectMeta{Name: "accounts", Namespace: "shop"},
			Spec: gatewayv1alpha1.APIRuleSpec{
				Hosts:   []gatewayv1alpha1.Hostname{host},
				Gateway: "istio-system/public",
				Service: &gatewayv1alpha1.ServiceReference{Name: "orders", Port: 8080},
				Rules: []gatewayv1alpha1.Rule{{Path: "/accounts/*", Methods: []gatewayv1alpha1.HTTPMethod{"GET"},
					JWT: &gatewayv1alpha1.JWTAuthentication{Issuer: suiteIssuer.url, JWKSURI: suiteIssuer.jwks, Audiences: []string{"accounts"}}}},
			},
		}
		Expect(k8sClient.Create(ctx, accounts)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// Gone with its policies before a later spec compares the
			// Istio objects' versions.
			_ = k8sClient.Delete(ctx, accounts)
			Eventually(isGone(accounts.DeepCopy()), timeout, interval).Should(BeTrue())
		})
		Eventually(func(g Gomega) {
			got := &gatewayv1alpha1.APIRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(accounts), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gatewayv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		}, timeout, interval).Should(Succeed())

		hour := time.Now().Add(time.Hour)
		other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		url := "http://" + *gatewayIP + "/accounts/7"
		bearer := func(token string) []string { return []string{"--header", "Authorization=Bearer " + token} }
		request := func(status string, extra ...string) []string {
			return append([]string{url, "--host", host, "--expect-status", status}, extra...)
		}
		requests := map[string][]string{
			"token":    request("200", append(bearer(suiteIssuer.sign(nil, "ada", []string{"accounts"}, hour)), "--expect-body", "orders GET /accounts/7")...),
			"no-token": request("403", "--expect-body", "RBAC: access denied"),
			"forged":   request("401", bearer(suiteIssuer.sign(other, "ada", []string{"accounts"}, hour))...),
			"expired":  request("401", bearer(suiteIssuer.sign(nil, "ada", []string{"accounts"}, time.Now().Add(-time.Hour)))...),
			"audience": request("403", bearer(suiteIssuer.sign(nil, "ada", []string{"billing"}, hour))...),
			// The orders rule's key set (https://idp.example.com) cannot be
			// fetched: istiod programs a public-only one instead (fail
			// closed), so no token of that issuer passes; explain, unable to
			// fetch it either, says the same.
			"unfetchable-keys": {"http://" + *gatewayIP + "/orders/42", "--host", "orders.example.com", "--expect-status", "401",
				"--header", "Authorization=Bearer " + suiteIssuer.signAs("https://idp.example.com", nil, "ada", nil, hour)},
		}
		started := time.Now()
		answers := requestFromPod(ctx, requests)
		Expect(answers["token"]).To(ContainSubstring("200 orders GET /accounts/7"))
		for _, name := range []string{"no-token", "forged", "expired", "audience", "unfetchable-keys"} {
			Expect(answers[name]).NotTo(ContainSubstring("orders GET"), "%s: the backend was not reached", name)
		}
		sidecarReport("accounts (jwt, issuer %s): valid token 200, no token 403, forged 401, expired 401, wrong audience 403; "+
			"orders (issuer https://idp.example.com, key set unreachable): 401 (%s, pods included)",
			suiteIssuer.url, time.Since(started).Round(100*time.Millisecond))
		expectSidecarTokenConfined(ctx, "shop", "orders")
	})
}

// expectSidecarTokenConfined is the attack on the backends' tokens: the
// ServiceAccount ns/sa of a backend's sidecar stand-in lists pods where its
// peers run (its namespace and the gateway's) and can do nothing else: no
// pods elsewhere (Portico's namespace, kube-system), no single pod, no
// watch, no Secrets, no policies.
func expectSidecarTokenConfined(ctx context.Context, ns, sa string) {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	as, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	for _, allowed := range sidecarPeerNamespaces(ns) {
		_, err := as.CoreV1().Pods(allowed).List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=10.0.0.1"})
		Expect(err).NotTo(HaveOccurred(), "%s/%s lists pods in %s", ns, sa, allowed)
	}
	attacks := map[string]error{}
	_, attacks["list pods of Portico's namespace"] = as.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	_, attacks["list pods of kube-system"] = as.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	_, attacks["list pods cluster-wide"] = as.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	_, attacks["get the gateway's pod"] = as.CoreV1().Pods(gatewayNamespace).Get(ctx, "any", metav1.GetOptions{})
	w, watchErr := as.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if watchErr == nil {
		w.Stop()
	}
	attacks["watch pods of its namespace"] = watchErr
	_, attacks["list Secrets of its namespace"] = as.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	_, attacks["read the gateway's Secrets"] = as.CoreV1().Secrets(gatewayNamespace).List(ctx, metav1.ListOptions{})
	attacks["delete a pod of its namespace"] = as.CoreV1().Pods(ns).Delete(ctx, "any", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	for what, err := range attacks {
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s as %s/%s: want Forbidden, got %v", what, ns, sa, err)
	}
	sidecarReport("attack: the sidecar stand-in's token %s/%s lists pods in %v only; %d other reads and writes Forbidden",
		ns, sa, sidecarPeerNamespaces(ns), len(attacks))
}
