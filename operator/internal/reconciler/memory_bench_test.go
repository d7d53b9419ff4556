package reconciler_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/operator/internal/catalog"
	"github.com/portico-dev/portico/operator/internal/reconciler"
	"github.com/portico-dev/portico/test/testenv"
)

// BenchmarkCRDCacheMemory measures how much heap the operator's CRD cache
// holds with 0 and with 500 large CRDs in the cluster (each a copy of the
// APIGateway CRD, ~100 KB of OpenAPI schema), and, for contrast, what a
// plain cache of the same 500 CRDs holds. Run with `make bench-memory`.
func BenchmarkCRDCacheMemory(b *testing.B) {
	const count = 500
	empty, withCRDs, plain := measureCRDCache(b, count)
	b.ReportMetric(empty/(1<<20), "MiB-heap-0-crds")
	b.ReportMetric(withCRDs/(1<<20), "MiB-heap-500-crds")
	b.ReportMetric(plain/(1<<20), "MiB-heap-500-crds-unstripped")
	b.ReportMetric((withCRDs-empty)/count, "B-per-crd")
}

// TestCRDCacheMemoryShort is the benchmark's short mode, run by go test:
// with a few large CRDs the operator's cache must hold less than a plain
// cache of the same CRDs (the transform drops their schemas). It asserts
// the result, never a figure of this machine.
func TestCRDCacheMemoryShort(t *testing.T) {
	const count = 20
	_, withCRDs, plain := measureCRDCache(t, count)
	if withCRDs >= plain {
		t.Fatalf("the operator's CRD cache holds %.0f bytes for %d large CRDs, a plain cache %.0f: the transform does not strip them", withCRDs, count, plain)
	}
}

// measureCRDCache creates count copies of the APIGateway CRD and returns
// the live heap of the operator's CRD cache before and after, and of a
// plain cache of the same CRDs.
func measureCRDCache(b testing.TB, count int) (empty, withCRDs, plain float64) {
	template, err := testenv.ReadCRDs(testenv.ProjectCRDPaths()[0] + "/operator.portico.dev_apigateways.yaml")
	if err != nil || len(template) != 1 {
		b.Fatalf("read template CRD: %v", err)
	}
	empty = cachedHeap(b, reconciler.CacheOptions(namespace, catalog.Builtin.CRDNames()), 0)
	created := createLargeCRDs(b, template[0], count)
	b.Cleanup(func() { deleteCRDs(created) })
	withCRDs = cachedHeap(b, reconciler.CacheOptions(namespace, catalog.Builtin.CRDNames()), count)
	plain = cachedHeap(b, cache.Options{}, count)
	return empty, withCRDs, plain
}

// cachedHeap starts a cache of CRDs, waits until it holds at least want of
// them, and returns the live heap it added.
func cachedHeap(b testing.TB, opts cache.Options, want int) float64 {
	b.Helper()
	cfg := testCfg
	opts.Scheme = k8sClient.Scheme()
	before := liveHeap()
	c, err := cache.New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.GetInformer(ctx, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	err = wait.PollUntilContextCancel(ctx, 0, true, func(ctx context.Context) (bool, error) {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		return len(list.Items) >= want, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	after := liveHeap()
	runtime.KeepAlive(c)
	return float64(after) - float64(before)
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func createLargeCRDs(b testing.TB, template *apiextensionsv1.CustomResourceDefinition, n int) []string {
	b.Helper()
	names := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		crd := template.DeepCopy()
		group := fmt.Sprintf("bench%03d.example.portico.dev", i)
		crd.Name = "apigateways." + group
		crd.Spec.Group = group
		names[i] = crd.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := k8sClient.Create(context.Background(), crd); client.IgnoreAlreadyExists(err) != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return names
}

func deleteCRDs(names []string) {
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_ = k8sClient.Delete(context.Background(), crd)
	}
}
