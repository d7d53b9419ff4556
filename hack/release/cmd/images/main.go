// Command images builds Portico's container images for one platform without
// a container engine or a registry (package hack/release/publish builds them,
// as `make release` does) and writes each to <output>/<IMAGE>.tar as a
// docker archive (what `docker load`, `ctr images import` and
// `kind load image-archive` read), tagged <registry>/<IMAGE>:<tag> for every
// --tag.
//
//	bin/release-tools/images [flags] [IMAGE...]
//
// IMAGE is portico-operator, <name>-controller (one per controllers/<name>),
// or a test image: pause (the node's sandbox image) or e2e-agent (the e2e
// suite's in-cluster client, backend and gateway). Without arguments it
// builds the product images.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/portico-dev/portico/hack/release/publish"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	output := fs.String("output", "bin/images", "directory the archives are written to")
	registry := fs.String("registry", "ghcr.io/portico-dev", "registry (and path) of the image references")
	tags := fs.String("tag", "v0.0.0-dev", "comma-separated tags of every image; the first is the binaries' version")
	arch := fs.String("arch", runtime.GOARCH, "GOARCH of the images (linux only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	product, err := publish.ProductImages(".")
	if err != nil {
		return err
	}
	known := slices.Concat(product, publish.TestImages())
	wanted := fs.Args()
	if len(wanted) == 0 {
		for _, img := range product {
			wanted = append(wanted, img.Name)
		}
	}
	if err := os.MkdirAll(*output, 0o755); err != nil {
		return err
	}
	tagList := strings.Split(*tags, ",")
	work, err := os.MkdirTemp("", "portico-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := publish.Builder{Root: ".", Version: tagList[0], Epoch: time.Unix(0, 0).UTC(), WorkDir: work, Log: os.Stderr}
	for _, n := range wanted {
		i := slices.IndexFunc(known, func(img publish.Image) bool { return img.Name == n })
		if i < 0 {
			return fmt.Errorf("unknown image %q", n)
		}
		_, built, err := b.Build(ctx, known[i], []v1.Platform{{OS: "linux", Architecture: *arch}})
		if err != nil {
			return err
		}
		refs := map[name.Reference]v1.Image{}
		for _, tag := range tagList {
			ref, err := name.NewTag(*registry + "/" + n + ":" + tag)
			if err != nil {
				return err
			}
			refs[ref] = built[0].Image
		}
		out := *output + "/" + n + ".tar"
		if err := tarball.MultiRefWriteToFile(out, refs); err != nil {
			return err
		}
		fmt.Println(out)
	}
	return nil
}
