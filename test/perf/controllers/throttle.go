package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/test/perf/internal/framework"
)

// The controllers run as their ServiceAccounts, as in a cluster: the admin
// kubeconfig is system:masters, which API Priority and Fairness exempts, so
// with it "no 429" would prove nothing. The bench installs the accounts and
// their RBAC from config/rbac (what `make manifests` generates) and gives
// each controller a kubeconfig that authenticates as the admin and
// impersonates its account: the API server classifies impersonated
// requests as the account's (flow schema service-accounts), and a
// controller denied something the bench needs fails the run, which checks
// the shipped RBAC too. The accounts and their roles stay in the cluster
// (namespace controllerNS); the next run updates them.
const (
	controllerNS = "portico-system"
	rbacDir      = "config/rbac"
	// tooManyRequests is the code label of a throttled request.
	tooManyRequests = "429"
	// flowRejected is kube-apiserver's count of the requests API Priority
	// and Fairness rejected, by flow schema and priority level.
	flowRejected = "apiserver_flowcontrol_rejected_requests_total"
)

// rbacFiles are the manifests of config/rbac the controllers need.
var rbacFiles = []string{
	"service_accounts.yaml", "bindings.yaml",
	contract.APIRule.Binary() + "/role.yaml", contract.RateLimit.Binary() + "/role.yaml",
}

// serviceAccountUser is the user name an account's token authenticates as.
func serviceAccountUser(account string) string {
	return "system:serviceaccount:" + controllerNS + ":" + account
}

// serviceAccountGroups are the groups the API server gives a
// ServiceAccount's token in controllerNS.
func serviceAccountGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNS, "system:authenticated"}
}

// installServiceAccounts creates (or updates) the controllers' accounts,
// roles and bindings, and writes one impersonating kubeconfig per
// controller into dir; it returns their paths by binary.
func (b *bench) installServiceAccounts(ctx context.Context, dir string) (map[string]string, error) {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", controllerNS, err)
	}
	accounts := []string{contract.APIRule.Binary(), contract.RateLimit.Binary()}
	for _, file := range rbacFiles {
		objs, err := readManifest(framework.RepoPath(filepath.Join(rbacDir, file)))
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if !slices.Contains(accounts, obj.GetName()) {
				continue // the operator's and other controllers'
			}
			// config/rbac's namespaced objects name portico-system, the
			// benchmark's namespace; one without a namespace goes there too.
			if !strings.HasPrefix(obj.GetKind(), "Cluster") && obj.GetNamespace() == "" {
				obj.SetNamespace(controllerNS)
			}
			if err := b.createOrReplace(ctx, obj); err != nil {
				return nil, err
			}
		}
	}
	paths := map[string]string{}
	for _, account := range accounts {
		path := filepath.Join(dir, account+".kubeconfig")
		if err := impersonatingKubeconfig(b.conn.Kubeconfig, path, account); err != nil {
			return nil, err
		}
		paths[account] = path
	}
	framework.Logf("the controllers run as their ServiceAccounts in %s (RBAC from %s)", controllerNS, rbacDir)
	return paths, nil
}

// readManifest decodes every object of a YAML file.
func readManifest(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// createOrReplace creates obj, or replaces the one an earlier run left (its
// rules may have changed since).
func (b *bench) createOrReplace(ctx context.Context, obj *unstructured.Unstructured) error {
	err := b.c.Create(ctx, obj.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		return nil
	}
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return fmt.Errorf("read %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	obj = obj.DeepCopy()
	obj.SetResourceVersion(current.GetResourceVersion())
	if err := b.c.Update(ctx, obj); err != nil {
		return fmt.Errorf("update %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// impersonatingKubeconfig writes to path the admin kubeconfig admin with
// its user impersonating the account, with the groups the API server gives
// a ServiceAccount's token.
func impersonatingKubeconfig(admin, path, account string) error {
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", admin, err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return fmt.Errorf("kubeconfig %s: no user in its current context %q", admin, cfg.CurrentContext)
	}
	user := cfg.AuthInfos[kctx.AuthInfo].DeepCopy()
	user.Impersonate = serviceAccountUser(account)
	user.ImpersonateGroups = serviceAccountGroups()
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{account: user}
	kctx = kctx.DeepCopy()
	kctx.AuthInfo = account
	cfg.Contexts = map[string]*clientcmdapi.Context{cfg.CurrentContext: kctx}
	return clientcmd.WriteToFile(*cfg, path)
}

// throttling is what the API server refused for overload during the run.
type throttling struct {
	// client is, per controller binary, its requests answered 429 once
	// ready (its rest_client_requests_total, over every process of the
	// run); startup those until ready.
	client, startup map[string]float64
	// server is kube-apiserver's rejections during the run: APF's by flow
	// schema, and every 429 it served by verb and resource.
	server map[string]float64
}

// noteStartup keeps the 429 answers the controller got until it was ready:
// a watch of a CRD installed just before gets 429 until kube-apiserver's
// watch cache for it is initialized, whatever the load, and client-go
// retries it.
func (p *controller) noteStartup(ctx context.Context) error {
	m, err := p.Scrape(ctx)
	if err != nil {
		return err
	}
	p.startup429 = m.Sum("rest_client_requests_total", map[string]string{"code": tooManyRequests})
	return nil
}

// tooMany reads how many of a controller's requests were answered 429
// since it was ready.
func tooMany(ctx context.Context, p *controller) (float64, error) {
	m, err := p.Scrape(ctx)
	if err != nil {
		return 0, err
	}
	return m.Sum("rest_client_requests_total", map[string]string{"code": tooManyRequests}) - p.startup429, nil
}

// apiServerRejections reads kube-apiserver's APF rejections by flow schema
// and, by "verb resource", the 429 answers it served to anyone (APF's and
// others', such as a watch cache that is not ready yet).
func apiServerRejections(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-apiserver metrics: %s", resp.Status)
	}
	m, err := framework.ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	out := map[string]float64{}
	for schema, n := range m.ByLabel(flowRejected, "flow_schema") {
		out["APF "+schema] = n
	}
	for _, s := range m["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["code"] == tooManyRequests {
			out["429 "+labels["verb"]+" "+labels["resource"]] += s.GetCounter().GetValue()
		}
	}
	return out, nil
}

// note reports the figures; err names the controllers that were throttled.
func (t throttling) note() (string, error) {
	var parts, throttled []string
	for _, name := range slices.Sorted(maps.Keys(t.client)) {
		parts = append(parts, fmt.Sprintf("%s %g", name, t.client[name]))
		if t.client[name] > 0 {
			throttled = append(throttled, fmt.Sprintf("%s %g", name, t.client[name]))
		}
	}
	var server []string
	for _, schema := range slices.Sorted(maps.Keys(t.server)) {
		server = append(server, fmt.Sprintf("%s %g", schema, t.server[schema]))
	}
	if len(server) == 0 {
		server = []string{"none"}
	}
	var startup []string
	for _, name := range slices.Sorted(maps.Keys(t.startup)) {
		startup = append(startup, fmt.Sprintf("%s %g", name, t.startup[name]))
	}
	note := fmt.Sprintf("429 answers to the controllers (as their ServiceAccounts) once ready, over the run: %s (until ready: %s); kube-apiserver's rejections (APF's by flow schema, 429s served to anyone by verb and resource): %s",
		strings.Join(parts, ", "), strings.Join(startup, ", "), strings.Join(server, ", "))
	if len(throttled) > 0 {
		return note, fmt.Errorf("the API server answered 429 to %s (want none)", strings.Join(throttled, ", "))
	}
	return note, nil
}

// warmWatchCaches opens a watch on every installed CRD's resources until
// kube-apiserver accepts it. It builds a CRD's storage, and its watch
// cache, on the first request; until the cache is initialized it answers
// watches with 429 whatever the load. On a real cluster the CRDs have long
// been served when a controller starts; here they were installed moments
// ago, and those 429s would be counted against the controllers.
func (b *bench) warmWatchCaches(ctx context.Context) error {
	dc, err := dynamic.NewForConfig(b.conn.Config)
	if err != nil {
		return err
	}
	for _, crd := range b.conn.CRDs {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				w, err := dc.Resource(gvr).Watch(ctx, metav1.ListOptions{})
				if apierrors.IsTooManyRequests(err) {
					return false, nil
				} else if err != nil {
					return false, err
				}
				w.Stop()
				return true, nil
			})
			if err != nil {
				return fmt.Errorf("watch %s: %w", gvr, err)
			}
		}
	}
	return nil
}
