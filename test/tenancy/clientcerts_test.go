package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// Issue 43, part 2 (docs/threat-model.md §20): the default gateway's client
// certificates are the administrator's. No tenant can loosen the
// requirement or change the CAs it trusts, and a forwarded client
// certificate header (XFCC), which any client can write, grants nothing:
// Portico writes no access rule that reads it.

// forgedCertificateHeaders are the ways a client writes a client
// certificate it does not hold: Envoy's XFCC as the gateway would set it,
// in the spellings proxies and backends read ('_' for '-', any case).
var forgedCertificateHeaders = []map[string]string{
	{"x-forwarded-client-cert": `By=spiffe://cluster.local/ns/team-a/sa/ledger;Hash=0;Subject="CN=partner";URI=spiffe://partners.example/client`},
	{"X-Forwarded-Client-Cert": `URI=spiffe://partners.example/client`},
	{"x_forwarded_client_cert": `URI=spiffe://partners.example/client`},
	{"x-client-cert": "-----BEGIN CERTIFICATE-----", "ssl-client-verify": "SUCCESS", "x-ssl-client-s-dn": "CN=partner"},
}

func TestClientCertificatesAreTheAdministrators(t *testing.T) {
	ctx := context.Background()
	dryRun := client.DryRunAll
	forbidden := func(name string, err func() error) {
		t.Run(name, func(t *testing.T) {
			e := err()
			NewWithT(t).Expect(apierrors.IsForbidden(e)).To(BeTrue(), "want Forbidden, got %v", e)
		})
	}
	forbidden("bob removing the gateway's client-certificate requirement from the APIGateway", func() error {
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		return bob.Patch(ctx, gw, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"gateway":{"clientCertificates":null}}}`)), dryRun)
	})
	forbidden("bob pointing the requirement at a CA bundle of his", func() error {
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		return bob.Patch(ctx, gw, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"gateway":{"clientCertificates":{"mode":"Optional","caBundle":{"configMapName":"bobs-ca"}}}}}`)), dryRun)
	})
	forbidden("bob rewriting status.gateway.clientCertificates", func() error {
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		return bob.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, []byte(`{"status":{"gateway":{"clientCertificates":"Required"}}}`)), dryRun)
	})
	for _, obj := range []client.Object{
		// The administrator's bundle, Portico's copy of it, and a Secret
		// of the copy's name that the gateway could read instead.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: "client-ca"}, Data: map[string]string{"ca.crt": "bob's CA"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap}, Data: map[string]string{"ca.crt": "bob's CA"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: operatorv1alpha1.DefaultGatewayClientCAConfigMap}, Data: map[string][]byte{"ca.crt": []byte("bob's CA")}},
		// Istio's older name for a credential's CAs.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: operatorv1alpha1.DefaultGatewayName + "-tls-cacert"}, Data: map[string][]byte{"cacert": []byte("bob's CA")}},
	} {
		forbidden("bob writing "+kindOf(obj)+" "+obj.GetNamespace()+"/"+obj.GetName()+" in the gateway's namespace", func() error {
			return bob.Create(ctx, obj, dryRun)
		})
	}

	t.Run("team-a's noAuth /admin for a forged x-forwarded-client-cert beside its jwt /admin is refused by the API server", func(t *testing.T) {
		t.Parallel()
		partner := noAuth("/admin")
		partner.Match = &gatewayv1alpha1.RequestMatch{Headers: []gatewayv1alpha1.RuleHeaderMatch{{
			Name: "x-forwarded-client-cert", Regex: `.*URI=spiffe://partners\.example/.*`,
		}}}
		rule := apiRule(teamA, "xfcc-self", "xfcc-self.a.example", publicGateway, backend("", "xfcc-self"), jwt("/admin", issuerA, keysA), partner)
		err := alice.Create(context.Background(), rule)
		g := NewWithT(t)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("a match selects a route, not access"))
	})

	t.Run("a client forging a client certificate header reaches no guarded path of team-a", func(t *testing.T) {
		t.Parallel()
		ledger := protectLedger(t, "ledger-xfcc", "")
		NewWithT(t).Eventually(func(g Gomega) {
			for _, headers := range forgedCertificateHeaders {
				r := judge.Request{Workload: ledger, Host: "ledger-xfcc.a.example", Path: "/admin", Method: "GET", Port: 8080, Headers: headers}
				g.Expect(decide(g, r).Allowed()).To(BeFalse(), "%s with %v", r, headers)
			}
			open := judge.Request{Workload: ledger, Host: "ledger-xfcc.a.example", Path: "/health", Method: "GET", Port: 8080, Headers: forgedCertificateHeaders[0]}
			g.Expect(decide(g, open).Allowed()).To(BeTrue(), "the open path stays open: %s", open)
			withToken := judge.Request{Workload: ledger, Host: "ledger-xfcc.a.example", Path: "/admin", Method: "GET", Port: 8080, Token: tokenA}
			g.Expect(decide(g, withToken).Allowed()).To(BeTrue(), "team-a's token still counts: %s", withToken)
		}, eventually, poll).Should(Succeed())
	})
}

// kindOf names an object's kind for a test name.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return "object"
}
