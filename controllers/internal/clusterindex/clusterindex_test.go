package clusterindex_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/controllers/internal/clusterindex"
	"github.com/portico-dev/portico/test/testenv"
)

var (
	testCfg   *rest.Config
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{
		WithoutProjectCRDs: true,
		Namespaces:         []string{"team-a", "team-b"},
		Setup: func(_ context.Context, env *testenv.Env) error {
			testCfg, k8sClient = env.Config, env.Client
			return nil
		},
	}))
}

// An index registered by Field is read by controller-runtime's own cache,
// as one registered by its IndexField is, by a List without a namespace:
// the objects of every namespace whose keys match, none other; and it holds
// one key per value, not two.
func TestFieldReadByTheCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const field = "data.owner"
	for _, cm := range []struct{ namespace, name, owner string }{
		{"team-a", "one", "shared"}, {"team-b", "two", "shared"}, {"team-b", "three", "other"}, {"team-a", "four", ""},
	} {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.namespace, Name: cm.name}}
		if cm.owner != "" {
			o.Data = map[string]string{"owner": cm.owner}
		}
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cache.New(testCfg, cache.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(o client.Object) []string {
		if v := o.(*corev1.ConfigMap).Data["owner"]; v != "" {
			return []string{v}
		}
		return nil
	}
	if err := clusterindex.Field(ctx, c, &corev1.ConfigMap{}, field, keys); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("the cache did not sync")
	}

	names := func(opts ...client.ListOption) []string {
		t.Helper()
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, opts...); err != nil {
			t.Fatalf("List %v: %v", opts, err)
		}
		var out []string
		for _, o := range list.Items {
			out = append(out, o.Namespace+"/"+o.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(client.MatchingFields{field: "shared"}), []string{"team-a/one", "team-b/two"}; !slices.Equal(got, want) {
		t.Errorf("shared: %v, want %v", got, want)
	}
	if got, want := names(client.MatchingFields{field: "other"}), []string{"team-b/three"}; !slices.Equal(got, want) {
		t.Errorf("other: %v, want %v", got, want)
	}
	if got := names(client.MatchingFields{field: "none"}); len(got) != 0 {
		t.Errorf("none: %v, want no object", got)
	}

	informer, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	indexer := informer.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer()
	values := indexer.ListIndexFuncValues("field:" + field)
	slices.Sort(values)
	if want := []string{"__all_namespaces/other", "__all_namespaces/shared"}; !slices.Equal(values, want) {
		t.Errorf("index values %v, want %v (the all-namespaces half only)", values, want)
	}
}
