package owned_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/portico-dev/portico/internal/owned"
)

// configMaps is a kind whose "spec" is its data, for the tests.
var configMaps = owned.Table{owned.Struct("ConfigMap", func(o *corev1.ConfigMap) *map[string]string { return &o.Data },
	func(dst, src *corev1.ConfigMap) { dst.Data = src.DeepCopy().Data },
	func(l *corev1.ConfigMapList) []*corev1.ConfigMap {
		out := make([]*corev1.ConfigMap, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out
	})}

var owner = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owner", UID: "owner-uid"}}

func configMap(name string, controlled bool, data string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"managed": "yes"}},
		Data: map[string]string{"k": data}}
	if controlled {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	return cm
}

// writer returns a Writer on a fake API server holding objs, and the
// count of its write requests.
func writer(t *testing.T, objs ...client.Object) (*owned.Writer, *int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	writes := 0
	count := func() { writes++ }
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, o, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, o, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			count()
			return c.Apply(ctx, o, opts...)
		},
	}).Build()
	return &owned.Writer{Client: c, Reader: c, Kinds: configMaps}, &writes
}

func TestWriteCreatesUpdatesAndRefuses(t *testing.T) {
	ctx := context.Background()
	owns := owned.ControlledBy(owner, "")
	for name, tc := range map[string]struct {
		existing      client.Object
		live          bool // the caller passes the existing object as live
		wantConflict  bool
		wantWrites    int
		wantData      string
		wantKeptLabel bool
	}{
		"missing: one create":                                  {wantWrites: 1, wantData: "new"},
		"the owner's, up to date: no request":                  {existing: configMap("cm", true, "new"), live: true, wantData: "new"},
		"the owner's, different: one update":                   {existing: configMap("cm", true, "old"), live: true, wantWrites: 1, wantData: "new", wantKeptLabel: true},
		"unseen by the cache, the owner's: create then update": {existing: configMap("cm", true, "old"), wantWrites: 2, wantData: "new", wantKeptLabel: true},
		"another's: a conflict, never an update":               {existing: configMap("cm", false, "old"), wantConflict: true, wantWrites: 1, wantData: "old"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var objs []client.Object
			var live client.Object
			if tc.existing != nil {
				tc.existing.SetLabels(map[string]string{"managed": "yes", "theirs": "kept"})
				objs = append(objs, tc.existing)
			}
			w, writes := writer(t, objs...)
			if tc.live {
				live = &corev1.ConfigMap{}
				g.Expect(w.Reader.Get(ctx, client.ObjectKeyFromObject(tc.existing), live)).To(Succeed())
			}
			_, conflict, err := w.Write(ctx, owns, configMap("cm", true, "new"), live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(conflict != "").To(Equal(tc.wantConflict), conflict)
			g.Expect(*writes).To(Equal(tc.wantWrites))
			got := &corev1.ConfigMap{}
			g.Expect(w.Reader.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, got)).To(Succeed())
			g.Expect(got.Data["k"]).To(Equal(tc.wantData))
			if tc.wantKeptLabel {
				g.Expect(got.Labels).To(HaveKeyWithValue("theirs", "kept"), "others' labels stay")
			}
		})
	}
}

func TestApplyCreatesUpdatesAndRefuses(t *testing.T) {
	ctx := context.Background()
	owns := func(o client.Object) bool { return o.GetLabels()["managed"] == "yes" }
	for name, tc := range map[string]struct {
		existing     *corev1.ConfigMap
		live         bool // the caller passes the existing object as live
		wantConflict bool
		wantWrites   int
		wantData     string
	}{
		"missing: one apply":                            {wantWrites: 1, wantData: "new"},
		"the owner's, up to date: no request":           {existing: configMap("cm", false, "new"), live: true, wantData: "new"},
		"the owner's, different: one apply":             {existing: configMap("cm", false, "old"), live: true, wantWrites: 1, wantData: "new"},
		"unseen by the cache, the owner's: one apply":   {existing: configMap("cm", false, "old"), wantWrites: 1, wantData: "new"},
		"another's, unseen: a conflict, never an apply": {existing: configMap("cm", false, "old"), wantConflict: true, wantData: "old"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var objs []client.Object
			var live client.Object
			if tc.existing != nil {
				if tc.wantConflict {
					tc.existing.Labels = map[string]string{"theirs": "kept"}
				}
				objs = append(objs, tc.existing)
			}
			w, writes := writer(t, objs...)
			w.Apply, w.FieldOwner = true, "test"
			if tc.live {
				live = &corev1.ConfigMap{}
				g.Expect(w.Reader.Get(ctx, client.ObjectKeyFromObject(tc.existing), live)).To(Succeed())
			}
			_, conflict, err := w.Write(ctx, owns, configMap("cm", false, "new"), live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(conflict != "").To(Equal(tc.wantConflict), conflict)
			g.Expect(*writes).To(Equal(tc.wantWrites))
			got := &corev1.ConfigMap{}
			g.Expect(w.Reader.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, got)).To(Succeed())
			g.Expect(got.Data["k"]).To(Equal(tc.wantData))
		})
	}
}

func TestDeleteOnlyTheOwnersAndRemembers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mine, theirs := configMap("mine", true, "x"), configMap("theirs", false, "x")
	w, writes := writer(t, mine, theirs)
	objs, err := configMaps.List(ctx, w.Reader, client.InNamespace("ns"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	remaining, err := w.Delete(ctx, owned.ControlledBy(owner, "ns"), objs, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remaining).To(BeZero())
	g.Expect(*writes).To(Equal(1), "only the owner's object is deleted")
	g.Expect(w.Reader.Get(ctx, client.ObjectKeyFromObject(theirs), &corev1.ConfigMap{})).To(Succeed())
	var deletedUID = objs[0].GetUID()
	if objs[0].GetName() != "mine" {
		deletedUID = objs[1].GetUID()
	}
	g.Expect(w.Deleted.Has(deletedUID)).To(BeTrue(), "a tombstone is left")
}

func TestOwnershipNeedsTheNamespaceAndTheController(t *testing.T) {
	g := NewWithT(t)
	elsewhere := configMap("cm", true, "x")
	elsewhere.Namespace = "other"
	g.Expect(owned.ControlledBy(owner, "ns")(elsewhere)).To(BeFalse(), "a controller reference in another namespace proves nothing")
	g.Expect(owned.ControlledBy(owner, "ns")(configMap("cm", false, "x"))).To(BeFalse(), "labels prove nothing")
	g.Expect(owned.ControlledBy(owner, "ns")(configMap("cm", true, "x"))).To(BeTrue())
}

func TestTableNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(configMaps.Name(configMap("cm", true, "x"))).To(Equal("ConfigMap"))
	g.Expect(configMaps.ID(configMap("cm", true, "x"))).To(Equal("ConfigMap ns/cm"))
	g.Expect(configMaps.Name(&corev1.Secret{})).To(Equal("Secret"), "a kind outside the table is named by its type")
	g.Expect(configMaps.Of(&corev1.Secret{})).To(BeNil())
}
