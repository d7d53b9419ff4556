// Command images builds Portico's container images without a container
// engine. Each image is what Dockerfile.operator and Dockerfile.controllers
// describe: one static Go binary (CGO_ENABLED=0, -trimpath, fixed ldflags)
// in one layer on an empty base, run as 65532:65532. The output is
// reproducible: the same sources and Go toolchain give the same image
// digest, because every timestamp is fixed (SOURCE_DATE_EPOCH, default 0)
// and nothing else varies.
//
//	go run ./hack/images [flags] [IMAGE...]
//
// IMAGE is portico-operator, <name>-controller (one per controllers/<name>),
// or one of the test-only images: pause (the node's sandbox image, from
// hack/pause) and e2e-agent (the e2e suite's in-cluster client, backend and
// gateway, from e2e/agent). Without arguments it builds the product images.
// Each image is written to <output>/<IMAGE>.tar as a docker archive (what
// `docker load`, `ctr images import` and `kind load image-archive` read),
// tagged <registry>/<IMAGE>:<tag> for every --tag.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const module = "github.com/portico-dev/portico"

// nonRoot is the user of every image, the distroless "nonroot" user that
// the Dockerfiles used to inherit.
const nonRoot = "65532:65532"

// image is one image to build: the Go package of its binary and where the
// binary lives in the image (the Dockerfiles' paths).
type image struct {
	name    string
	pkg     string
	binPath string
}

type options struct {
	output   string
	registry string
	tags     []string
	version  string
	goarch   string
	epoch    time.Time
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	var o options
	var tags string
	fs.StringVar(&o.output, "output", "bin/images", "directory the archives are written to")
	fs.StringVar(&o.registry, "registry", "ghcr.io/portico-dev", "registry (and path) of the image references")
	fs.StringVar(&tags, "tag", "v0.0.0-dev", "comma-separated tags of every image")
	fs.StringVar(&o.version, "version", "", "version stamped into the binaries (default: the first tag)")
	fs.StringVar(&o.goarch, "arch", runtime.GOARCH, "GOARCH of the images (linux only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.tags = strings.Split(tags, ",")
	if o.version == "" {
		o.version = o.tags[0]
	}
	epoch, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	o.epoch = epoch

	known, err := catalog()
	if err != nil {
		return err
	}
	wanted := fs.Args()
	if len(wanted) == 0 {
		for _, img := range known {
			if !strings.HasPrefix(img.pkg, "./hack/") && !strings.HasPrefix(img.pkg, "./e2e/") {
				wanted = append(wanted, img.name)
			}
		}
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		return err
	}
	for _, n := range wanted {
		i := slices.IndexFunc(known, func(img image) bool { return img.name == n })
		if i < 0 {
			names := make([]string, len(known))
			for j, img := range known {
				names[j] = img.name
			}
			return fmt.Errorf("unknown image %q (known: %s)", n, strings.Join(names, ", "))
		}
		if err := build(o, known[i]); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

// catalog lists every image this command can build; controllers are found
// as controllers/<name>/main.go, like the Makefile's CONTROLLERS.
func catalog() ([]image, error) {
	images := []image{{name: "portico-operator", pkg: "./operator", binPath: "/portico-operator"}}
	mains, err := filepath.Glob("controllers/*/main.go")
	if err != nil {
		return nil, err
	}
	if len(mains) == 0 {
		return nil, errors.New("no controllers/*/main.go: run from the repository root")
	}
	for _, m := range mains {
		dir := filepath.Base(filepath.Dir(m))
		images = append(images, image{name: dir + "-controller", pkg: "./controllers/" + dir, binPath: "/controller"})
	}
	return append(images,
		image{name: "pause", pkg: "./hack/pause", binPath: "/pause"},
		image{name: "e2e-agent", pkg: "./e2e/agent", binPath: "/e2e-agent"},
	), nil
}

func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// ldflags are the Makefile's GO_LDFLAGS: the version goes into both
// binaries' version variables (each binary has only one of them).
func ldflags(version string) string {
	return "-s -w -X " + module + "/operator/internal/cli.version=" + version +
		" -X " + module + "/controllers/runtime.version=" + version
}

func build(o options, img image) error {
	tmp, err := os.MkdirTemp("", "portico-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binary := filepath.Join(tmp, "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags(o.version), "-o", binary, img.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", img.pkg, err)
	}

	layerTar, err := binaryLayer(binary, img.binPath, o.epoch)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	created := v1.Time{Time: o.epoch}
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: o.goarch,
		OS:           "linux",
		Config: v1.Config{
			Entrypoint: []string{img.binPath},
			User:       nonRoot,
			WorkingDir: "/",
			Env:        []string{"PATH=/"},
			Labels: map[string]string{
				"org.opencontainers.image.title":   img.name,
				"org.opencontainers.image.version": o.version,
				"org.opencontainers.image.source":  "https://" + module,
			},
		},
	})
	if err != nil {
		return err
	}
	withLayer, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "hack/images: go build " + img.pkg, Comment: img.binPath},
	})
	if err != nil {
		return err
	}
	final, err := mutate.CreatedAt(withLayer, created)
	if err != nil {
		return err
	}

	refs := map[name.Reference]v1.Image{}
	var refNames []string
	for _, tag := range o.tags {
		ref, err := name.NewTag(o.registry + "/" + img.name + ":" + tag)
		if err != nil {
			return err
		}
		refs[ref] = final
		refNames = append(refNames, ref.String())
	}
	out := filepath.Join(o.output, img.name+".tar")
	partial := out + ".partial"
	if err := tarball.MultiRefWriteToFile(partial, refs); err != nil {
		return err
	}
	if err := os.Rename(partial, out); err != nil {
		return err
	}
	digest, err := final.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s\n", out, digest, strings.Join(refNames, ","))
	return nil
}

// binaryLayer returns an uncompressed tar holding only the binary, owned
// by root and world-executable, with a fixed timestamp.
func binaryLayer(binary, path string, mtime time.Time) ([]byte, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(path, "/"),
		Mode:     0o755,
		Size:     int64(len(content)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
