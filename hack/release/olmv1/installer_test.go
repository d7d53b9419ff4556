package olmv1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/hack/release/bundle"
	"github.com/portico-dev/portico/internal/manifest"
	"github.com/portico-dev/portico/test/testenv"
)

// namespace is the ClusterExtension's spec.namespace in the sample.
const namespace = bundle.DefaultNamespace

var (
	root          = testenv.RepoRoot()
	installerFile = filepath.Join(root, "config", "olmv1", "installer.yaml")
	// admin reaches the API server as its administrator; installer as the
	// installer ServiceAccount, as operator-controller does with the
	// token it requests for it.
	admin     client.Client
	installer *dynamic.DynamicClient
)

// The API server has no CRD but its own: the installer creates Portico's.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		WithoutProjectCRDs: true,
		Namespaces:         []string{namespace},
		AddToScheme:        []func(*runtime.Scheme) error{rbacv1.AddToScheme, appsv1.AddToScheme},
		Setup: func(_ context.Context, env *testenv.Env) error {
			admin = env.Client
			cfg := rest.CopyConfig(env.Config)
			cfg.QPS = -1 // no client-side limit: the tests send a few thousand requests
			cfg.Impersonate = rest.ImpersonationConfig{
				UserName: "system:serviceaccount:" + namespace + ":" + InstallerName,
				Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			}
			var err error
			installer, err = dynamic.NewForConfig(cfg)
			return err
		},
	}))
}

// checkedInObjects are the objects operator-controller makes of the
// checked-in bundle/.
func checkedInObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := manifest.ReadTree(filepath.Join(root, "bundle"), "manifests", "metadata")
	if err != nil {
		t.Fatalf("read bundle/: %v (run make bundle)", err)
	}
	b, err := ReadBundle(files)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := b.Objects(namespace)
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// TestInstallerIsUpToDate: config/olmv1/installer.yaml is what make bundle
// writes for the bundle it generates.
func TestInstallerIsUpToDate(t *testing.T) {
	g := NewWithT(t)
	b, err := bundle.Generate(bundle.Options{ChartDir: filepath.Join(root, "charts", "portico"), ConfigDir: filepath.Join(root, "config")})
	g.Expect(err).NotTo(HaveOccurred())
	want, err := InstallerYAML(b.Files, namespace, ExtensionName)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := os.ReadFile(installerFile)
	g.Expect(err).NotTo(HaveOccurred(), "run make bundle")
	g.Expect(string(got)).To(Equal(string(want)), "config/olmv1/installer.yaml differs from what make bundle writes: run make bundle and commit it")
}

// readInstaller reads config/olmv1/installer.yaml: its ClusterRole and Role.
func readInstaller(t *testing.T) (objects []*unstructured.Unstructured, clusterRole *rbacv1.ClusterRole, role *rbacv1.Role) {
	t.Helper()
	objects, err := manifest.ReadObjects(installerFile)
	if err != nil {
		t.Fatal(err)
	}
	clusterRole, role = &rbacv1.ClusterRole{}, &rbacv1.Role{}
	for _, u := range objects {
		switch u.GetKind() {
		case "ClusterRole":
			NewWithT(t).Expect(convert(u, clusterRole)).To(Succeed())
		case "Role":
			NewWithT(t).Expect(convert(u, role)).To(Succeed())
		}
	}
	return objects, clusterRole, role
}

func convert(u *unstructured.Unstructured, into client.Object) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// requests sends, as the installer, every request operator-controller
// v1.2.0 sends for the objects over an install, an upgrade and an
// uninstall: Helm reads each object and creates it, patches it, and
// deletes it (but the CRDs, kept); operator-controller lists and watches
// each kind in all namespaces. It returns the requests the API server
// forbade; any other failure but NotFound (an object a forbidden request
// did not create) and AlreadyExists (a previous round's objects) is an
// error.
func requests(ctx context.Context, objects []*unstructured.Unstructured) (forbidden []string, err error) {
	var (
		mu   sync.Mutex
		errs []error
	)
	record := func(what string, err error, tolerated ...func(error) bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			forbidden = append(forbidden, what)
		case slices.ContainsFunc(tolerated, func(ok func(error) bool) bool { return ok(err) }):
		default:
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	resourceOf := func(u *unstructured.Unstructured) dynamic.ResourceInterface {
		gvr, err := GVR(u)
		if err != nil {
			panic(err)
		}
		if Namespaced(u) {
			return installer.Resource(gvr).Namespace(u.GetNamespace())
		}
		return installer.Resource(gvr)
	}
	name := func(verb string, u *unstructured.Unstructured) string {
		return fmt.Sprintf("%s %s %s", verb, u.GetKind(), client.ObjectKeyFromObject(u))
	}
	// each sends one request per object at once (the requests of a phase
	// do not depend on each other).
	each := func(objects []*unstructured.Unstructured, send func(u *unstructured.Unstructured)) {
		var wg sync.WaitGroup
		for _, u := range objects {
			wg.Go(func() { send(u) })
		}
		wg.Wait()
	}
	isBinding := func(u *unstructured.Unstructured) bool { return strings.HasSuffix(u.GetKind(), "RoleBinding") }
	bindings := slices.DeleteFunc(slices.Clone(objects), func(u *unstructured.Unstructured) bool { return !isBinding(u) })
	others := slices.DeleteFunc(slices.Clone(objects), isBinding)

	// Install: Helm reads, then creates (bindings after their roles).
	each(objects, func(u *unstructured.Unstructured) {
		_, err := resourceOf(u).Get(ctx, u.GetName(), metav1.GetOptions{})
		record(name("get", u), err, apierrors.IsNotFound)
	})
	create := func(u *unstructured.Unstructured) {
		_, err := resourceOf(u).Create(ctx, u, metav1.CreateOptions{})
		// NotFound: a binding whose role a forbidden request did not create.
		record(name("create", u), err, apierrors.IsAlreadyExists, apierrors.IsNotFound)
	}
	each(others, create)
	each(bindings, create)
	// Upgrade: Helm patches.
	upgraded := []byte(`{"metadata":{"annotations":{"portico.dev/upgraded":"true"}}}`)
	each(objects, func(u *unstructured.Unstructured) {
		_, err := resourceOf(u).Patch(ctx, u.GetName(), types.MergePatchType, upgraded, metav1.PatchOptions{})
		record(name("patch", u), err, apierrors.IsNotFound)
	})
	// operator-controller's watch of the release, one kind at a time.
	var kinds []*unstructured.Unstructured
	watched := map[schema.GroupVersionResource]bool{}
	for _, u := range objects {
		if gvr, _ := GVR(u); !watched[gvr] {
			watched[gvr] = true
			kinds = append(kinds, u)
		}
	}
	each(kinds, func(u *unstructured.Unstructured) {
		gvr, _ := GVR(u)
		selector := metav1.ListOptions{LabelSelector: "olm.operatorframework.io/owner-kind=ClusterExtension,olm.operatorframework.io/owner-name=" + ExtensionName}
		_, err := installer.Resource(gvr).List(ctx, selector)
		record("list "+gvr.Resource+" in all namespaces", err)
		w, err := installer.Resource(gvr).Watch(ctx, selector)
		record("watch "+gvr.Resource+" in all namespaces", err)
		if err == nil {
			w.Stop()
		}
	})
	// Uninstall: Helm deletes all but the kept CRDs.
	each(objects, func(u *unstructured.Unstructured) {
		if u.GetKind() == "CustomResourceDefinition" {
			return
		}
		err := resourceOf(u).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		record(name("delete", u), err, apierrors.IsNotFound)
	})
	return forbidden, errors.Join(errs...)
}

// applyInstaller creates or replaces the installer's objects as the
// administrator does, with kubectl apply.
func applyInstaller(t *testing.T, objects []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objects {
		NewWithT(t).Expect(admin.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed())
	}
}

// The installer of config/olmv1/installer.yaml installs, upgrades and
// uninstalls the bundle as operator-controller does (every request of
// every object: CRDs, ServiceAccounts, ClusterRoles and their bindings,
// the Roles and RoleBindings and the Deployment and Service in
// portico-system), and nothing more: it may not create a Deployment in
// kube-system nor delete Portico's CRDs. With any one of its rules
// removed, some request fails: the RBAC is least.
func TestInstaller(t *testing.T) {
	ctx := context.Background()
	objects := checkedInObjects(t)
	installerObjects, clusterRole, role := readInstaller(t)
	applyInstaller(t, installerObjects)

	t.Run("installs, upgrades, watches and uninstalls the bundle", func(t *testing.T) {
		g := NewWithT(t)
		kinds := map[string]int{}
		for _, u := range objects {
			kinds[u.GetKind()]++
		}
		g.Expect(kinds).To(Equal(map[string]int{
			"CustomResourceDefinition": 3, "ServiceAccount": 5, "ClusterRole": 5, "ClusterRoleBinding": 5,
			"Role": 5, "RoleBinding": 5, "Service": 1, "Deployment": 1,
		}), "the objects operator-controller makes of the bundle")
		// The authorizer's cache sees the installer's RBAC in a moment.
		g.Eventually(func(g Gomega) {
			forbidden, err := requests(ctx, objects)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(forbidden).To(BeEmpty())
		}, 30*time.Second, time.Second).Should(Succeed())

		// Once more with every object in place (the last round's uninstall
		// deleted them): every create succeeds.
		for _, u := range objects {
			gvr, _ := GVR(u)
			var err error
			if Namespaced(u) {
				_, err = installer.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
			} else {
				_, err = installer.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
			}
			if u.GetKind() == "CustomResourceDefinition" {
				g.Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "CRD %s: %v", u.GetName(), err)
				continue
			}
			g.Expect(err).NotTo(HaveOccurred(), "create %s %s", u.GetKind(), u.GetName())
		}
		deployment := &appsv1.Deployment{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "portico-operator"}, deployment)).To(Succeed())
	})

	t.Run("nothing more", func(t *testing.T) {
		g := NewWithT(t)
		elsewhere := &unstructured.Unstructured{}
		for _, u := range objects {
			if u.GetKind() == "Deployment" {
				elsewhere = u.DeepCopy()
			}
		}
		elsewhere.SetNamespace("kube-system")
		_, err := installer.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("kube-system").Create(ctx, elsewhere, metav1.CreateOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a Deployment in kube-system: %v", err)

		for _, u := range objects {
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			err := installer.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
				Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting the CRD %s: %v", u.GetName(), err)
		}

		_, err = installer.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace("kube-system").Get(ctx, "anything", metav1.GetOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading a Secret in kube-system: %v", err)
		_, err = installer.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterroles")).Namespace("").Get(ctx, "cluster-admin", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "the installer reads any ClusterRole (their names are hashes)")
		binding := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "installer-escalates"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": InstallerName, "namespace": namespace}},
		}}
		_, err = installer.Resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")).Create(ctx, binding, metav1.CreateOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding cluster-admin to itself: %v", err)
	})

	t.Run("least", func(t *testing.T) {
		// Removing each rule in turn: some request must then be forbidden.
		// The finalizers rule is the exception: only the
		// OwnerReferencesPermissionEnforcement admission plugin, which the
		// test's API server (like most) does not run, checks it.
		finalizers := FinalizersRule(ExtensionName)
		type cut struct {
			name  string
			apply func(without int) client.Object
			rules []rbacv1.PolicyRule
		}
		cuts := []cut{
			{name: "ClusterRole", rules: clusterRole.Rules, apply: func(i int) client.Object {
				c := clusterRole.DeepCopy()
				c.Rules = slices.Delete(slices.Clone(c.Rules), i, i+1)
				return c
			}},
			{name: "Role", rules: role.Rules, apply: func(i int) client.Object {
				r := role.DeepCopy()
				r.Rules = slices.Delete(slices.Clone(r.Rules), i, i+1)
				return r
			}},
		}
		restore := func(t *testing.T) {
			t.Helper()
			applyInstaller(t, installerObjects)
			NewWithT(t).Eventually(func(g Gomega) {
				forbidden, err := requests(ctx, objects)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(forbidden).To(BeEmpty())
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		}
		for _, c := range cuts {
			for i, rule := range c.rules {
				if rule.String() == finalizers.String() {
					continue
				}
				t.Run(fmt.Sprintf("%s rule %d %v %v %v", c.name, i, rule.APIGroups, rule.Resources, rule.Verbs), func(t *testing.T) {
					g := NewWithT(t)
					cutDown := c.apply(i)
					cutDown.SetResourceVersion("")
					cutDown.SetManagedFields(nil)
					g.Expect(admin.Update(ctx, withResourceVersion(g, cutDown))).To(Succeed())
					defer restore(t)
					g.Eventually(func(g Gomega) {
						forbidden, err := requests(ctx, objects)
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(forbidden).NotTo(BeEmpty())
					}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "every request is still allowed without %s", rule.String())
				})
			}
		}
	})
}

// withResourceVersion sets the stored object's resourceVersion on o, for
// an update.
func withResourceVersion(g Gomega, o client.Object) client.Object {
	stored := o.DeepCopyObject().(client.Object)
	g.Expect(admin.Get(context.Background(), client.ObjectKeyFromObject(o), stored)).To(Succeed())
	o.SetResourceVersion(stored.GetResourceVersion())
	return o
}

// InstallerRules refuses a CRD that deleting the ClusterExtension would
// take away, and drops rules that others grant.
func TestInstallerRules(t *testing.T) {
	g := NewWithT(t)
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName("apirules.gateway.portico.dev")
	_, _, err := InstallerRules([]*unstructured.Unstructured{crd}, ExtensionName)
	g.Expect(err).To(MatchError(ContainSubstring("lacks helm.sh/resource-policy: keep")))

	rule := func(verbs []string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: verbs, ResourceNames: names}
	}
	all := rule([]string{"create", "get", "patch", "delete"})
	byName := rule([]string{"get", "patch"}, "portico-operator-metrics")
	g.Expect(covered([]rbacv1.PolicyRule{all}, byName)).To(BeTrue())
	g.Expect(covered([]rbacv1.PolicyRule{byName}, all)).To(BeFalse())
	g.Expect(covered([]rbacv1.PolicyRule{rule([]string{"*"})}, all)).To(BeTrue())
	g.Expect(covered([]rbacv1.PolicyRule{rule([]string{"get"})}, all)).To(BeFalse())
	g.Expect(withoutCovered([]rbacv1.PolicyRule{byName, all, all}, nil)).To(Equal([]rbacv1.PolicyRule{all}))
	g.Expect(withoutCovered([]rbacv1.PolicyRule{byName}, []rbacv1.PolicyRule{all})).To(BeEmpty())
	g.Expect(strings.Join(FinalizersRule("x").ResourceNames, "")).To(Equal("x"))
}
