package envoy

import (
	"fmt"
	"strings"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// UnpackTyped reads a typed config into m as Envoy does: the message
// itself, or a TypedStruct (udpa.type.v1 or xds.type.v3) of m's type, whose
// value is m in JSON (istiod passes an EnvoyFilter's TypedStruct through
// unchanged, and Envoy converts it when it loads the filter; an unknown
// field is an error there as here). It reports false for another type.
func UnpackTyped(a *anypb.Any, m proto.Message) (bool, error) {
	if a == nil {
		return false, nil
	}
	if a.MessageIs(m) {
		return true, a.UnmarshalTo(m)
	}
	var typeURL string
	var value *structpb.Struct
	switch {
	case a.MessageIs(&udpatypev1.TypedStruct{}):
		ts := &udpatypev1.TypedStruct{}
		if err := a.UnmarshalTo(ts); err != nil {
			return false, err
		}
		typeURL, value = ts.GetTypeUrl(), ts.GetValue()
	case a.MessageIs(&xdstypev3.TypedStruct{}):
		ts := &xdstypev3.TypedStruct{}
		if err := a.UnmarshalTo(ts); err != nil {
			return false, err
		}
		typeURL, value = ts.GetTypeUrl(), ts.GetValue()
	default:
		return false, nil
	}
	if name := string(m.ProtoReflect().Descriptor().FullName()); typeURL[strings.LastIndex(typeURL, "/")+1:] != name {
		return false, nil
	}
	raw, err := protojson.Marshal(value)
	if err != nil {
		return false, err
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		return false, fmt.Errorf("TypedStruct of %s: %w", typeURL, err)
	}
	return true, nil
}
