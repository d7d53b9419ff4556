package owned

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metadataAccept asks the API server to answer a write with the written
// object's metadata (PartialObjectMetadata, protobuf where the resource
// serves it, else JSON), and lets a server that cannot answer so send the
// whole object (as JSON, read for its metadata only).
const metadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// MetadataAnswers returns c with its creates, updates and patches of typed
// objects (also patches of their status) answered by the API server with
// the written object's metadata only, which becomes obj's metadata:
// resourceVersion, UID, generation, labels, owner references, managed
// fields as stored. The rest of obj (spec, status) stays as it was sent, not
// as stored: for callers that read only the metadata of what they wrote
// (their write's version, the UID that proves ownership). Everything else,
// and objects without a typed ObjectMeta (unstructured, metadata-only),
// goes to c unchanged.
//
// Issue 45: the API server's whole answer to a write, decoded by the
// client (and by the quarantine guard before it), was a fifth of the
// apirule controller's CPU; the metadata of the same answer is a fraction
// of it, the request is the same one, and errors (a conflict, a name
// taken, a refusal) come back as before, as *apierrors.StatusError.
func MetadataAnswers(c client.Client, cfg *rest.Config, httpClient *http.Client) (client.Client, error) {
	rc, err := rest.UnversionedRESTClientForConfigAndClient(metadata.ConfigFor(cfg), httpClient)
	if err != nil {
		return nil, fmt.Errorf("metadata answers: %w", err)
	}
	return &metadataAnswers{Client: c, rest: rc}, nil
}

type metadataAnswers struct {
	client.Client
	rest rest.Interface
}

// target is where a write goes (its resource's path) and the ObjectMeta
// its answer goes into.
type target struct {
	meta *metav1.ObjectMeta
	path []string
}

// targetOf returns the path of obj's resource (with its name when named)
// and the ObjectMeta the answer goes into.
func (c *metadataAnswers) targetOf(obj client.Object, named bool) (target, bool, error) {
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata:
		return target{}, false, nil
	}
	accessor, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return target{}, false, nil
	}
	om, ok := accessor.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return target{}, false, nil
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return target{}, false, err
	}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return target{}, false, err
	}
	return target{meta: om, path: resourcePath(mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace,
		obj.GetNamespace(), obj.GetName(), named)}, true, nil
}

// resourcePath is the API path of a resource's collection, or of one of
// its objects when named.
func resourcePath(gvr schema.GroupVersionResource, namespaced bool, namespace, name string, named bool) []string {
	path := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"/api", gvr.Version}
	}
	if namespaced && namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	path = append(path, gvr.Resource)
	if named {
		path = append(path, name)
	}
	return path
}

// Create implements client.Writer.
func (c *metadataAnswers) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	t, ok, err := c.targetOf(obj, false)
	if err != nil || !ok {
		return c.orWhole(err, func() error { return c.Client.Create(ctx, obj, opts...) })
	}
	body, err := encode(c, obj)
	if err != nil {
		return err
	}
	o := (&client.CreateOptions{}).ApplyOptions(opts).AsCreateOptions()
	req := c.rest.Post().AbsPath(t.path...).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).SpecificallyVersionedParams(o, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	return answer(ctx, req, t.meta)
}

// Update implements client.Writer.
func (c *metadataAnswers) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	t, ok, err := c.targetOf(obj, true)
	if err != nil || !ok {
		return c.orWhole(err, func() error { return c.Client.Update(ctx, obj, opts...) })
	}
	body, err := encode(c, obj)
	if err != nil {
		return err
	}
	o := (&client.UpdateOptions{}).ApplyOptions(opts).AsUpdateOptions()
	req := c.rest.Put().AbsPath(t.path...).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).SpecificallyVersionedParams(o, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	return answer(ctx, req, t.meta)
}

// Patch implements client.Writer.
func (c *metadataAnswers) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.patch(ctx, obj, patch, "", opts, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

// patch patches obj (its subresource, when not "") and reads the answer's
// metadata into it; whole is the client's own patch, for objects left to
// it.
func (c *metadataAnswers) patch(ctx context.Context, obj client.Object, patch client.Patch, subresource string, opts []client.PatchOption, whole func() error) error {
	t, ok, err := c.targetOf(obj, true)
	if err != nil || !ok {
		return c.orWhole(err, whole)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("patch %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	path := t.path
	if subresource != "" {
		path = append(path, subresource)
	}
	o := (&client.PatchOptions{}).ApplyOptions(opts).AsPatchOptions()
	req := c.rest.Patch(patch.Type()).AbsPath(path...).Body(data).SpecificallyVersionedParams(o, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	return answer(ctx, req, t.meta)
}

// Status implements client.StatusClient: patches of the status subresource
// are answered with metadata too.
func (c *metadataAnswers) Status() client.SubResourceWriter {
	return statusAnswers{SubResourceWriter: c.Client.Status(), c: c}
}

type statusAnswers struct {
	client.SubResourceWriter
	c *metadataAnswers
}

// Patch implements client.SubResourceWriter.
func (s statusAnswers) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	po := &client.SubResourcePatchOptions{}
	po.ApplyOptions(opts)
	if po.SubResourceBody != nil {
		return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	return s.c.patch(ctx, obj, patch, "status", []client.PatchOption{&po.PatchOptions}, func() error {
		return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	})
}

// orWhole returns err, or, when there is none, runs the client's own write.
func (c *metadataAnswers) orWhole(err error, whole func() error) error {
	if err != nil {
		return err
	}
	return whole()
}

// encode is obj as JSON, with its apiVersion and kind (which a typed
// object may lack and a custom resource's body must have).
func encode(c client.Client, obj client.Object) ([]byte, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return body, nil
}

// answer sends req and makes the metadata of its answer into into.
func answer(ctx context.Context, req *rest.Request, into *metav1.ObjectMeta) error {
	result := req.SetHeader("Accept", metadataAccept).Do(ctx)
	if err := result.Error(); err != nil {
		return err
	}
	obj, err := result.Get()
	if runtime.IsNotRegisteredError(err) {
		// The whole object, from a server that could not answer with its
		// metadata: the metadata of its JSON.
		raw, rawErr := result.Raw()
		if rawErr != nil {
			return rawErr
		}
		var partial metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &partial); err != nil {
			return fmt.Errorf("read the answer's metadata: %w", err)
		}
		obj, err = &partial, nil
	}
	if err != nil {
		return fmt.Errorf("read the answer's metadata: %w", err)
	}
	partial, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || partial.UID == "" && partial.ResourceVersion == "" {
		return fmt.Errorf("read the answer's metadata: %T is no object's metadata", obj)
	}
	*into = partial.ObjectMeta
	return nil
}
