// Package config holds Portico's kustomize bases; this test proves that
// config/default renders a complete install the API server accepts and that
// the samples are valid.
package config

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/manifest"
	"github.com/portico-dev/portico/test/testenv"
)

var k8sClient client.Client

func TestMain(m *testing.M) {
	// Istio's and the Gateway API's CRDs, as on a cluster the samples are
	// applied to.
	os.Exit(testenv.Run(m, testenv.RunInput{
		Istio:      true,
		GatewayAPI: true,
		Namespaces: []string{"portico-system", "shop", "istio-system"},
		Setup: func(_ context.Context, env *testenv.Env) error {
			k8sClient = env.Client
			return nil
		},
	}))
}

// kustomize renders a directory with the kubectl built by hack/testbin.sh.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	bin, err := testenv.AssetsDir()
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir).Output()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl kustomize %s", dir)
	objs, err := manifest.Objects(out)
	g.Expect(err).NotTo(HaveOccurred())
	return objs
}

// applyDryRun server-side applies every object without persisting it.
func applyDryRun(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		err := k8sClient.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner("config-test"), client.ForceOwnership, client.DryRunAll)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s %s", u.GetKind(), u.GetName())
	}
}

func TestDefaultRendersACompleteInstall(t *testing.T) {
	g := NewWithT(t)
	objs := kustomize(t, "default")
	kinds := map[string][]string{}
	inDefault := map[string][]string{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
			g.Expect(u.GetNamespace()).To(BeEmpty(), "%s %s is cluster-scoped", u.GetKind(), u.GetName())
		default:
			if u.GetNamespace() == "default" {
				inDefault[u.GetKind()] = append(inDefault[u.GetKind()], u.GetName())
				continue
			}
			g.Expect(u.GetNamespace()).To(Equal("portico-system"), "%s %s", u.GetKind(), u.GetName())
		}
		kinds[u.GetKind()] = append(kinds[u.GetKind()], u.GetName())
	}
	binaries := []string{"apirule-controller", "gateway-controller", "portico-operator", "ratelimit-controller"}
	g.Expect(kinds["CustomResourceDefinition"]).To(ConsistOf("apigateways.operator.portico.dev", "apirules.gateway.portico.dev", "ratelimits.gateway.portico.dev"))
	// The rate-limit service reads only in portico-system: a Role, no ClusterRole.
	namespaced := append(slices.Clone(binaries), "portico-ratelimit-service")
	g.Expect(kinds["ServiceAccount"]).To(ConsistOf(namespaced))
	g.Expect(kinds["ClusterRole"]).To(ConsistOf(binaries))
	g.Expect(kinds["ClusterRoleBinding"]).To(ConsistOf(binaries))
	g.Expect(kinds["Role"]).To(ConsistOf(namespaced))
	g.Expect(kinds["RoleBinding"]).To(ConsistOf(namespaced))
	g.Expect(kinds["Deployment"]).To(ConsistOf("portico-operator"))
	// Only the operator has anything in namespace default: a Role that reads
	// the API server's EndpointSlices (Service default/kubernetes's), and its
	// binding.
	g.Expect(inDefault).To(Equal(map[string][]string{"Role": {"portico-operator"}, "RoleBinding": {"portico-operator"}}))
	for _, u := range objs {
		if u.GetKind() == "Role" && u.GetNamespace() == "default" {
			rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
			g.Expect(rules).To(ConsistOf(map[string]any{
				"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "resourceNames": []any{"kubernetes"},
				"verbs": []any{"get", "list", "watch"},
			}), "the operator only reads the EndpointSlice kubernetes in namespace default")
		}
	}

	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		g.Expect(subjects).To(HaveLen(1))
		subject := subjects[0].(map[string]any)
		g.Expect(subject["name"]).To(Equal(u.GetName()), "each binary's role is bound to its own ServiceAccount")
		g.Expect(subject["namespace"]).To(Equal("portico-system"))
		roleRef, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		g.Expect(roleRef).To(Equal(u.GetName()), "each binding grants its binary's own role")
	}
	applyDryRun(t, objs)
}

// The samples are applied as a folder (kubectl apply -f config/samples/),
// so it holds only manifests, no kustomization, and the folder of the
// Gateway API samples, applied on their own.
func TestSamplesAreValid(t *testing.T) {
	g := NewWithT(t)
	paths, err := filepath.Glob(filepath.Join("samples", "*"))
	g.Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		if p == filepath.Join("samples", "gateway-api") {
			continue
		}
		g.Expect(filepath.Ext(p)).To(Equal(".yaml"), "only manifests in config/samples")
		g.Expect(filepath.Base(p)).NotTo(Equal("kustomization.yaml"))
		objects, err := testenv.ReadManifests(p)
		g.Expect(err).NotTo(HaveOccurred())
		objs = append(objs, objects...)
	}
	kinds := []string{}
	for _, u := range objs {
		kinds = append(kinds, u.GetKind())
		switch u.GetKind() {
		case "APIGateway":
			// The sample lists every controller and configures the default
			// gateway, which the APIRule sample uses.
			var names []string
			controllers, _, _ := unstructured.NestedSlice(u.Object, "spec", "controllers")
			for _, c := range controllers {
				names = append(names, c.(map[string]any)["name"].(string))
			}
			g.Expect(names).To(ConsistOf("apirule", "ratelimit", "gateway"))
			domain, _, _ := unstructured.NestedString(u.Object, "spec", "gateway", "domain")
			g.Expect(domain).NotTo(BeEmpty())
		case "APIRule":
			_, named, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "gateway")
			g.Expect(named).To(BeFalse(), "the APIRule sample uses the default gateway")
		}
	}
	g.Expect(kinds).To(ContainElements("Namespace", "Service", "APIGateway", "APIRule", "RateLimit"))
	applyDryRun(t, objs)
}

// The Gateway API samples (kubectl apply -f config/samples/gateway-api/,
// after config/samples/): a Gateway and the orders APIRule in HTTPRoute
// mode, on that Gateway.
func TestGatewayAPISamplesAreValid(t *testing.T) {
	g := NewWithT(t)
	paths, err := filepath.Glob(filepath.Join("samples", "gateway-api", "*"))
	g.Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		g.Expect(filepath.Ext(p)).To(Equal(".yaml"), "only manifests in config/samples/gateway-api")
		objects, err := testenv.ReadManifests(p)
		g.Expect(err).NotTo(HaveOccurred())
		objs = append(objs, objects...)
	}
	var gateway, parent string
	for _, u := range objs {
		switch u.GetKind() {
		case "Gateway":
			gateway = u.GetNamespace() + "/" + u.GetName()
		case "APIRule":
			name, _, _ := unstructured.NestedString(u.Object, "spec", "parentRef", "name")
			ns, _, _ := unstructured.NestedString(u.Object, "spec", "parentRef", "namespace")
			if ns == "" {
				ns = u.GetNamespace()
			}
			parent = ns + "/" + name
		}
	}
	g.Expect(gateway).NotTo(BeEmpty(), "a Gateway sample")
	g.Expect(parent).To(Equal(gateway), "the APIRule sample's parentRef names the Gateway sample")
	applyDryRun(t, objs)
}
