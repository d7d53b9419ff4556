package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Documents splits a multi-document YAML stream at its "---" lines and
// returns the documents that hold more than blank lines and comments, each
// as it stands in the stream.
func Documents(raw []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		switch {
		case errors.Is(err, io.EOF):
			return docs, nil
		case err != nil:
			return nil, err
		case !blank(doc):
			docs = append(docs, doc)
		}
	}
}

// blank reports whether a document holds nothing but blank lines, comments
// and the "---" line that starts it.
func blank(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.HasPrefix(line, []byte("---")) {
			return false
		}
	}
	return true
}

// Objects decodes every document of a multi-document YAML stream strictly
// (a duplicate key is an error) and returns the objects, skipping documents
// without one (only comments, or null). Numbers decode as JSON's do.
func Objects(raw []byte) ([]*unstructured.Unstructured, error) {
	docs, err := Documents(raw)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range docs {
		var object map[string]any
		if err := yaml.UnmarshalStrict(doc, &object); err != nil {
			return nil, err
		}
		if len(object) > 0 {
			out = append(out, &unstructured.Unstructured{Object: object})
		}
	}
	return out, nil
}

// ReadObjects reads the objects of a multi-document YAML file as Objects
// decodes them.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objects, err := Objects(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objects, nil
}
