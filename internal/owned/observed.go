package owned

import (
	"crypto/sha256"
	"encoding/base64"

	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ObservedSpec is the annotation Observe puts on a cached copy: the
// SpecHash of the spec the API server sent, computed as the object entered
// the cache. Its key has a space, which the API server refuses in every
// annotation key: no stored object can carry it, so finding it proves the
// copy went through Observe and the value is the controller's own reading
// of the live spec, never a claim by whoever can write the object.
const ObservedSpec = "portico.dev/observed spec"

// Observe is a cache transform for objects of kind k: it records the
// SpecHash of obj's spec in the ObservedSpec annotation and empties the
// spec and the managed fields, so that the cache holds the object's
// metadata (name, UID, resourceVersion, labels, owner references) and
// what the Writer needs to tell whether it is up to date (UpToDate) and to
// update it (Update sends the whole desired spec), without the spec
// itself. It returns false, and leaves obj whole, when the kind has no
// SpecHash or the spec cannot be hashed. An object that already carries
// ObservedSpec went through Observe before (the quarantine guard observes
// watch events as it decodes them): it is kept as it is.
func (k *Kind) Observe(obj client.Object) bool {
	if k.SpecHash == nil || k.ClearSpec == nil {
		return false
	}
	if _, ok := observedHash(obj); ok {
		obj.SetManagedFields(nil)
		k.ClearSpec(obj)
		return true
	}
	hash := k.SpecHash(obj)
	if hash == "" {
		return false
	}
	annotations := make(map[string]string, len(obj.GetAnnotations())+1)
	for key, v := range obj.GetAnnotations() {
		annotations[key] = v
	}
	annotations[ObservedSpec] = hash
	obj.SetAnnotations(annotations)
	obj.SetManagedFields(nil)
	k.ClearSpec(obj)
	return true
}

// observedHash returns the ObservedSpec of a copy that went through
// Observe.
func observedHash(obj client.Object) (string, bool) {
	hash, ok := obj.GetAnnotations()[ObservedSpec]
	return hash, ok && hash != ""
}

// withoutObserved removes ObservedSpec from an object about to be sent (an
// update built on a cached copy): the API server would refuse the key.
func withoutObserved(obj client.Object) {
	annotations := obj.GetAnnotations()
	if _, ok := annotations[ObservedSpec]; !ok {
		return
	}
	delete(annotations, ObservedSpec)
	if len(annotations) == 0 {
		annotations = nil
	}
	obj.SetAnnotations(annotations)
}

// protoHash is the SHA-256 of a message's deterministic wire encoding
// (map entries sorted), base64: equal for messages proto.Equal finds
// equal, different otherwise but for floats (-0 and +0, NaN), which no
// kind here carries in a spec. "" when the message does not encode.
func protoHash(m proto.Message) string {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return base64.RawStdEncoding.EncodeToString(sum[:])
}
