package owned

import (
	"context"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is one kind of object a controller writes: how to make one to read
// into, how to list them, and how to compare and copy its spec.
type Kind struct {
	// Name names the kind in messages, logs and metrics.
	Name string
	// New returns an empty object of the kind; NewList an empty list.
	New     func() client.Object
	NewList func() client.ObjectList
	// Items are the objects of a list from NewList.
	Items func(client.ObjectList) []client.Object
	// SpecEqual reports whether two objects of the kind have equal specs;
	// CopySpec makes dst's spec a copy of src's.
	SpecEqual func(a, b client.Object) bool
	CopySpec  func(dst, src client.Object)
	// SpecHash, for kinds a cache may hold without their spec (Observe),
	// returns a digest of the spec that is equal for two objects exactly
	// when SpecEqual holds; ClearSpec empties the spec. Both nil for kinds
	// that are always held whole.
	SpecHash  func(obj client.Object) string
	ClearSpec func(obj client.Object)
	// Extract, for kinds written as typed apply configurations
	// (Writer.ApplyConfiguration), returns the fields fieldManager owns on
	// obj as an apply configuration (client-go's Extract<Kind>).
	Extract func(obj client.Object, fieldManager string) (any, error)
}

// Applied is a kind written as typed apply configurations and compared on
// the fields the writer owns (Writer.ApplyConfiguration): the operator's
// Deployments, Services, budgets and policies.
func Applied[T any, PT object[T], A any](name string, extract func(PT, string) (A, error)) Kind {
	return Kind{
		Name: name, New: func() client.Object { return PT(new(T)) },
		Extract: func(obj client.Object, fieldManager string) (any, error) { return extract(obj.(PT), fieldManager) },
	}
}

// object and list are pointers to a Kubernetes object and list type.
type object[T any] interface {
	*T
	client.Object
}

type list[L any] interface {
	*L
	client.ObjectList
}

// Proto is a kind whose spec is a protocol buffer message (Istio's
// objects): compared with proto.Equal, copied with proto.Merge, hashed
// (SpecHash) as the SHA-256 of its deterministic wire encoding.
func Proto[T any, PT object[T], L any, PL list[L]](name string, spec func(PT) proto.Message, items func(PL) []PT) Kind {
	return Kind{
		Name: name, New: func() client.Object { return PT(new(T)) }, NewList: func() client.ObjectList { return PL(new(L)) },
		Items:     func(l client.ObjectList) []client.Object { return objects(items(l.(PL))) },
		SpecEqual: func(a, b client.Object) bool { return proto.Equal(spec(a.(PT)), spec(b.(PT))) },
		CopySpec: func(dst, src client.Object) {
			proto.Reset(spec(dst.(PT)))
			proto.Merge(spec(dst.(PT)), spec(src.(PT)))
		},
		SpecHash:  func(obj client.Object) string { return protoHash(spec(obj.(PT))) },
		ClearSpec: func(obj client.Object) { proto.Reset(spec(obj.(PT))) },
	}
}

// Struct is a kind whose spec is a Go struct (Kubernetes' and the Gateway
// API's objects): compared with equality.Semantic, copied by copySpec
// (which must deep-copy).
func Struct[T any, PT object[T], L any, PL list[L], S any](name string, spec func(PT) *S, copySpec func(dst, src PT), items func(PL) []PT) Kind {
	return Kind{
		Name: name, New: func() client.Object { return PT(new(T)) }, NewList: func() client.ObjectList { return PL(new(L)) },
		Items:     func(l client.ObjectList) []client.Object { return objects(items(l.(PL))) },
		SpecEqual: func(a, b client.Object) bool { return equality.Semantic.DeepEqual(spec(a.(PT)), spec(b.(PT))) },
		CopySpec:  func(dst, src client.Object) { copySpec(dst.(PT), src.(PT)) },
	}
}

func objects[PT client.Object](items []PT) []client.Object {
	out := make([]client.Object, len(items))
	for i, o := range items {
		out[i] = o
	}
	return out
}

// Table is the kinds one controller writes.
type Table []Kind

// Of returns the kind of obj, or nil when the table lacks it.
func (t Table) Of(obj client.Object) *Kind {
	typ := reflect.TypeOf(obj)
	for i := range t {
		if reflect.TypeOf(t[i].New()) == typ {
			return &t[i]
		}
	}
	return nil
}

// Name names obj's kind: its table name, else its Go type's ("Secret").
func (t Table) Name(obj client.Object) string {
	if k := t.Of(obj); k != nil {
		return k.Name
	}
	if typ := reflect.TypeOf(obj); typ.Kind() == reflect.Pointer {
		return typ.Elem().Name()
	}
	return fmt.Sprintf("%T", obj)
}

// ID identifies an object among those of every kind of the table.
func (t Table) ID(obj client.Object) string {
	return t.Name(obj) + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// newLike returns an empty object of obj's type to read into: decoding
// into a copy of a desired object would keep desired fields the live
// object lacks (owner references).
func newLike(obj client.Object) client.Object {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// List lists the objects of every kind of the table that opts pick, kind
// by kind in the table's order, one request per kind.
func (t Table) List(ctx context.Context, reader client.Reader, opts ...client.ListOption) ([]client.Object, error) {
	var objs []client.Object
	for _, k := range t {
		list := k.NewList()
		if err := reader.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.Name, err)
		}
		objs = append(objs, k.Items(list)...)
	}
	return objs, nil
}
