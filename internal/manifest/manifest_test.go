package manifest

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestDocuments(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"none":                      {in: "", want: nil},
		"only separators":           {in: "---\n---\n", want: nil},
		"only comments":             {in: "# a\n---\n  # b\n", want: nil},
		"one, led by a separator":   {in: "---\na: 1\n", want: []string{"---\na: 1\n"}},
		"two, a blank one between":  {in: "a: 1\n---\n\n---\nb: 2", want: []string{"a: 1\n", "b: 2\n"}},
		"separator with a comment":  {in: "a: 1\n--- # next\nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		"a block scalar with a '#'": {in: "a: |\n  # kept\n", want: []string{"a: |\n  # kept\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			docs, err := Documents([]byte(tc.in))
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, d := range docs {
				got = append(got, string(d))
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
	_, err := Documents([]byte("a: 1\n--- b: 2\n"))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("invalid Yaml document separator")))
}

func TestObjects(t *testing.T) {
	g := NewWithT(t)
	objs, err := Objects([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# nothing\n---\nnull\n---\nkind: Service\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[0].GetName()).To(Equal("a"))
	g.Expect(objs[1].GetKind()).To(Equal("Service"))

	_, err = Objects([]byte("kind: Service\nkind: Pod\n"))
	g.Expect(err).To(HaveOccurred(), "a duplicate key is an error")

	path := filepath.Join(t.TempDir(), "m.yaml")
	g.Expect(os.WriteFile(path, []byte("a: [\n"), 0o644)).To(Succeed())
	_, err = ReadObjects(path)
	g.Expect(err).To(MatchError(HavePrefix(path + ": ")))
}

// WriteTree removes what the owned directories no longer hold, writes what
// changed and leaves the rest of the tree and unchanged files alone.
func TestWriteTree(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	write("owned/stale.yaml", "gone")
	write("owned/sub/stale.yaml", "gone too")
	write("owned/same.yaml", "same")
	write("mine.yaml", "not owned")
	unchanged, err := os.Stat(filepath.Join(root, "owned", "same.yaml"))
	g.Expect(err).NotTo(HaveOccurred())

	files := map[string][]byte{"owned/same.yaml": []byte("same"), "owned/new.yaml": []byte("new"), "empty/x.yaml": []byte("x")}
	var log []string
	g.Expect(WriteTree(root, []string{"owned", "empty"}, files, func(f string, a ...any) { log = append(log, f) })).To(Succeed())

	got, err := ReadTree(root, "owned", "empty")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(files))
	g.Expect(filepath.Join(root, "mine.yaml")).To(BeAnExistingFile())
	g.Expect(log).To(Equal([]string{"removed %s", "removed %s", "wrote %s", "wrote %s"}))
	again, err := os.Stat(filepath.Join(root, "owned", "same.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ModTime()).To(Equal(unchanged.ModTime()), "an unchanged file is not written")

	written, err := WriteFile(filepath.Join(root, "owned", "same.yaml"), []byte("same"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeFalse())
}
