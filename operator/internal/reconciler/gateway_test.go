package reconciler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

const certManagerCRD = "certificates.cert-manager.io"

// certManagerGateway is a default gateway whose certificate cert-manager
// issues.
func certManagerGateway() *operatorv1alpha1.GatewaySpec {
	return &operatorv1alpha1.GatewaySpec{
		Domain: "example.com",
		Certificate: &operatorv1alpha1.GatewayCertificate{CertManager: &operatorv1alpha1.CertManagerCertificate{
			IssuerRef: operatorv1alpha1.IssuerReference{Name: "le", Kind: "ClusterIssuer"},
		}},
	}
}

// The gateway controller needs cert-manager's Certificate CRD only while
// spec.gateway.certificate.certManager is set: it is Blocked without it
// then, and runs without it for a self-signed certificate.
func TestCertManagerCRDIsRequiredOnlyForACertManagerCertificate(t *testing.T) {
	setCRDs(t, slices.DeleteFunc(slices.Clone(allCRDs), func(name string) bool { return name == certManagerCRD })...)
	createGatewayWithSpec(t, operatorv1alpha1.APIGatewaySpec{Gateway: certManagerGateway()})

	expectBlockedOnCertManager := func(t *testing.T) {
		t.Helper()
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			gw := controllerStatus(g, gatewayCtl)
			g.Expect(gw.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(gw.Reason).To(Equal(operatorv1alpha1.ReasonCRDNotFound))
			g.Expect(gw.MissingCRDs).To(Equal([]string{"certificates.cert-manager.io/v1"}))
			g.Expect(gw.Message).To(ContainSubstring("certificates.cert-manager.io/v1 is required because spec.gateway.certificate.certManager is set"))
		}, eventually).Should(Succeed())
		g.Expect(deploymentGone("gateway-controller")()).To(BeTrue(), "a Blocked controller has no Deployment")
	}

	t.Run("certManager without cert-manager's CRD blocks only the gateway controller", func(t *testing.T) {
		g := NewWithT(t)
		expectBlockedOnCertManager(t)
		g.Eventually(func(g Gomega) {
			getDeployment(g, "apirule-controller")
			getDeployment(g, "ratelimit-controller")
			g.Expect(controllerStatus(g, apirule).Phase).NotTo(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(controllerStatus(g, ratelimit).Phase).NotTo(Equal(operatorv1alpha1.PhaseBlocked))
		}, eventually).Should(Succeed())
		g.Consistently(deploymentGone("gateway-controller"), 2*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	t.Run("a self-signed certificate (no certificate field) runs without cert-manager's CRD", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Gateway = &operatorv1alpha1.GatewaySpec{Domain: "example.com"}
		})
		g.Eventually(func(g Gomega) {
			gw := &operatorv1alpha1.APIGateway{}
			g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)).To(Succeed())
			g.Expect(gw.Spec.Gateway.Certificate).To(HaveField("SelfSigned", Not(BeNil())), "the API server defaults the certificate to selfSigned")
			getDeployment(g, "gateway-controller")
			st := controllerStatus(g, gatewayCtl)
			g.Expect(st.Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
			g.Expect(st.MissingCRDs).To(BeEmpty())
		}, eventually).Should(Succeed())
		err := k8sClient.Get(context.Background(), client.ObjectKey{Name: certManagerCRD}, &apiextensionsv1.CustomResourceDefinition{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "cert-manager's CRD is still not installed: %v", err)
	})

	t.Run("back to certManager blocks again", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Gateway = certManagerGateway() })
		g.Eventually(deploymentGone("gateway-controller"), eventually).Should(BeTrue())
		expectBlockedOnCertManager(t)
	})

	t.Run("installing cert-manager's CRD unblocks the gateway controller", func(t *testing.T) {
		g := NewWithT(t)
		installCRD(t, certManagerCRD)
		g.Eventually(func(g Gomega) {
			getDeployment(g, "gateway-controller")
			st := controllerStatus(g, gatewayCtl)
			g.Expect(st.Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
			g.Expect(st.MissingCRDs).To(BeEmpty())
		}, eventually).Should(Succeed())
	})
}

// gatewayAPICRDs are the Gateway API CRDs the gateway controller needs
// while spec.gateway.gatewayAPI is set.
var gatewayAPICRDs = []string{"gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"}

// The Gateway API's CRDs are required only while the APIGateway asks for a
// Gateway API default gateway; the operator reacts to their install and
// removal live, as for any required CRD, and the other controllers run
// without them.
func TestGatewayAPICRDsAreRequiredOnlyForAGatewayAPIDefaultGateway(t *testing.T) {
	setCRDs(t, slices.DeleteFunc(slices.Clone(allCRDs), func(name string) bool { return slices.Contains(gatewayAPICRDs, name) })...)
	createGatewayWithSpec(t, operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{
		Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{},
	}})
	expectBlocked := func(t *testing.T) {
		t.Helper()
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			gw := controllerStatus(g, gatewayCtl)
			g.Expect(gw.Phase).To(Equal(operatorv1alpha1.PhaseBlocked))
			g.Expect(gw.MissingCRDs).To(ConsistOf("gateways.gateway.networking.k8s.io/v1", "httproutes.gateway.networking.k8s.io/v1"))
			g.Expect(gw.Message).To(ContainSubstring("is required because spec.gateway.gatewayAPI is set"))
			g.Expect(controllerStatus(g, apirule).Phase).NotTo(Equal(operatorv1alpha1.PhaseBlocked), "HTTPRoute mode is optional for the apirule controller")
		}, eventually).Should(Succeed())
		g.Expect(deploymentGone("gateway-controller")()).To(BeTrue())
	}
	t.Run("without the Gateway API's CRDs only the gateway controller is Blocked", expectBlocked)
	t.Run("installing them unblocks it", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range gatewayAPICRDs {
			installCRD(t, name)
		}
		g.Eventually(func(g Gomega) {
			getDeployment(g, "gateway-controller")
			st := controllerStatus(g, gatewayCtl)
			g.Expect(st.Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
			g.Expect(st.MissingCRDs).To(BeEmpty())
		}, eventually).Should(Succeed())
	})
	t.Run("removing one blocks it again", func(t *testing.T) {
		g := NewWithT(t)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: gatewayAPICRDs[1]}, crd)).To(Succeed())
		g.Expect(k8sClient.Delete(context.Background(), crd)).To(Succeed())
		g.Eventually(deploymentGone("gateway-controller"), eventually).Should(BeTrue())
	})
	t.Run("an Istio default gateway runs without them", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Gateway.GatewayAPI = nil })
		g.Eventually(func(g Gomega) {
			getDeployment(g, "gateway-controller")
			g.Expect(controllerStatus(g, gatewayCtl).MissingCRDs).To(BeEmpty())
		}, eventually).Should(Succeed())
	})
}

// status.gateway is the gateway controller's: the operator's own status
// writes keep whatever it holds.
func TestGatewayStatusSurvivesOperatorStatusWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	setCRDs(t, allCRDs...)
	gw := createGateway(t)
	g.Eventually(func(g Gomega) {
		getDeployment(g, "ratelimit-controller")
		g.Expect(controllerStatus(g, ratelimit).Phase).To(Equal(operatorv1alpha1.PhaseProgressing))
	}, eventually).Should(Succeed())

	// What the gateway controller would write.
	want := &operatorv1alpha1.GatewayStatus{State: operatorv1alpha1.GatewayReady, Gateway: "istio-system/portico-gateway"}
	patch := []byte(`{"status":{"gateway":{"state":"Ready","gateway":"istio-system/portico-gateway"}}}`)
	g.Expect(k8sClient.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("gateway-controller"))).To(Succeed())
	g.Expect(gatewayStatus(g).Gateway).To(Equal(want))

	t.Run("a controller disabled", func(t *testing.T) {
		g := NewWithT(t)
		updateGateway(t, func(gw *operatorv1alpha1.APIGateway) {
			gw.Spec.Controllers = []operatorv1alpha1.ControllerSpec{{Name: ratelimit, Enabled: ptr.To(false)}}
		})
		g.Eventually(func(g Gomega) {
			st := gatewayStatus(g)
			g.Expect(controllerStatus(g, ratelimit).Phase).To(Equal(operatorv1alpha1.PhaseDisabled))
			g.Expect(st.ObservedGeneration).To(BeEquivalentTo(2), "the operator wrote its status for the new spec")
		}, eventually).Should(Succeed())
		g.Expect(gatewayStatus(g).Gateway).To(Equal(want))
	})

	t.Run("controllers rolled out", func(t *testing.T) {
		g := NewWithT(t)
		setRollout(t, "apirule-controller", rolledOut)
		setRollout(t, "gateway-controller", rolledOut)
		g.Eventually(func(g Gomega) {
			g.Expect(gatewayStatus(g).State).To(Equal(operatorv1alpha1.StateReady))
		}, eventually).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(gatewayStatus(g).Gateway).To(Equal(want))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
}
