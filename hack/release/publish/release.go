package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/portico-dev/portico/hack/release/helmchart"
	"github.com/portico-dev/portico/hack/release/olm"
	"github.com/portico-dev/portico/hack/release/sbom"
	"github.com/portico-dev/portico/hack/release/signing"
)

// InstallNamespace is the namespace install.yaml installs into.
const InstallNamespace = "portico-system"

// Options of one release.
type Options struct {
	// Root is the repository root.
	Root string
	// Version is the release, vX.Y.Z[-pre]: the image tags, the chart's
	// version and appVersion, the binaries' version.
	Version string
	// Registry is host[:port]/path: images at <Registry>/<image>, the
	// chart at <Registry>/charts/portico.
	Registry  string
	Platforms []v1.Platform
	// Epoch is every timestamp of the release.
	Epoch time.Time
	// Output receives release.json, install.yaml, NOTES.md and the chart
	// archive.
	Output string
	// SigningKey is a cosign private key file; empty leaves the artifacts
	// unsigned (CI signs keyless afterwards).
	SigningKey      string
	SigningPassword []byte
	Log             io.Writer
}

// Record is release.json: what a release pushed, by digest.
type Record struct {
	Version   string     `json:"version"`
	Registry  string     `json:"registry"`
	Created   string     `json:"created"`
	Platforms []string   `json:"platforms"`
	Signed    bool       `json:"signed"`
	Artifacts []Artifact `json:"artifacts"`
}

// Artifact is one pushed artifact.
type Artifact struct {
	Name string `json:"name"`
	// Kind is image, chart or bundle.
	Kind string `json:"kind"`
	// Reference is repository@sha256:….
	Reference string `json:"reference"`
	// Tag is repository:tag.
	Tag string `json:"tag"`
	// Platforms of an image index.
	Platforms []PlatformArtifact `json:"platforms,omitempty"`
}

// PlatformArtifact is one platform image of an index and its SBOM.
type PlatformArtifact struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	SBOM     string `json:"sbom"`
}

// Digest is the artifact's digest.
func (a Artifact) Digest() string {
	_, d, _ := strings.Cut(a.Reference, "@")
	return d
}

// ReadRecord reads a release.json.
func ReadRecord(path string) (*Record, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Record
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// Artifact returns the artifact named name.
func (m *Record) Artifact(name string) (Artifact, bool) {
	for _, a := range m.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return Artifact{}, false
}

// ValidateVersion checks that v is vMAJOR.MINOR.PATCH[-pre][+build].
func ValidateVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("version %q must start with v (v1.2.3)", v)
	}
	if _, err := version.ParseSemantic(strings.TrimPrefix(v, "v")); err != nil {
		return fmt.Errorf("version %q is not semver: %w", v, err)
	}
	return nil
}

// RemoteOptions are the registry options of every push: the context and
// the default keychain (~/.docker/config.json, as `docker login` writes).
func RemoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// PlainHTTP says whether the registry is spoken to over HTTP, as
// go-containerregistry decides it (localhost and loopback addresses).
func PlainHTTP(registry string) (bool, error) {
	repo, err := name.NewRepository(registry + "/x")
	if err != nil {
		return false, err
	}
	return repo.Scheme() == "http", nil
}

// Run builds, pushes and (with a key) signs a release, and writes
// release.json, install.yaml, NOTES.md and the chart archive into
// o.Output.
func Run(ctx context.Context, o Options) (*Record, error) {
	if err := ValidateVersion(o.Version); err != nil {
		return nil, err
	}
	o.Registry = strings.TrimSuffix(o.Registry, "/")
	plainHTTP, err := PlainHTTP(o.Registry)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", o.Registry, err)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	work := filepath.Join(o.Output, "work")
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	m := &Record{Version: o.Version, Registry: o.Registry, Created: o.Epoch.UTC().Format(time.RFC3339)}
	for _, p := range o.Platforms {
		m.Platforms = append(m.Platforms, p.String())
	}
	pinned, err := publishImages(ctx, o, work, m)
	if err != nil {
		return nil, err
	}
	chrt, err := publishChart(o, pinned, plainHTTP, m)
	if err != nil {
		return nil, err
	}
	bundleArtifact, err := publishBundle(ctx, o, work, pinned)
	if err != nil {
		return nil, err
	}
	m.Artifacts = append(m.Artifacts, bundleArtifact)
	install, err := helmchart.RenderInstall(chrt, InstallNamespace)
	if err != nil {
		return nil, err
	}
	if o.SigningKey != "" {
		if err := sign(ctx, o, m); err != nil {
			return nil, err
		}
	}
	return m, writeReleaseFiles(ctx, o, m, install)
}

// publishImages publishes every product image into m and returns the
// chart's images pinned to their digests.
func publishImages(ctx context.Context, o Options, work string, m *Record) (helmchart.Images, error) {
	images, err := ProductImages(o.Root)
	if err != nil {
		return helmchart.Images{}, err
	}
	pinned := helmchart.Images{Registry: o.Registry, Version: o.Version, Digests: map[string]string{}}
	b := Builder{Root: o.Root, Version: o.Version, Epoch: o.Epoch, WorkDir: filepath.Join(work, "bin"), Log: o.Log}
	for _, img := range images {
		a, err := publishImage(ctx, b, img, o)
		if err != nil {
			return helmchart.Images{}, err
		}
		pinned.Digests[img.Name] = a.Digest()
		m.Artifacts = append(m.Artifacts, a)
	}
	return pinned, nil
}

// publishChart packages the chart with the pinned images, writes its
// archive into o.Output and pushes it into m.
func publishChart(o Options, pinned helmchart.Images, plainHTTP bool, m *Record) (*chart.Chart, error) {
	archive, chrt, err := helmchart.Package(filepath.Join(o.Root, "charts", helmchart.Name), pinned, o.Epoch)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Output, helmchart.Name+"-"+o.Version+".tgz"), archive, 0o644); err != nil {
		return nil, err
	}
	chartRepo := o.Registry + "/charts/" + helmchart.Name
	fmt.Fprintf(o.Log, "pushing chart oci://%s:%s\n", chartRepo, o.Version)
	chartDigest, err := helmchart.Push(archive, chartRepo, o.Version, o.Epoch, plainHTTP)
	if err != nil {
		return nil, err
	}
	m.Artifacts = append(m.Artifacts, Artifact{Name: helmchart.Name, Kind: "chart",
		Reference: chartRepo + "@" + chartDigest, Tag: chartRepo + ":" + o.Version})
	return chrt, nil
}

// sign signs the digest of every artifact of m with o's key.
func sign(ctx context.Context, o Options, m *Record) error {
	var digests []name.Digest
	for _, a := range m.Artifacts {
		d, err := name.NewDigest(a.Reference)
		if err != nil {
			return err
		}
		digests = append(digests, d)
	}
	fmt.Fprintf(o.Log, "signing %d digests with %s\n", len(digests), o.SigningKey)
	if err := signing.Sign(ctx, o.SigningKey, o.SigningPassword, digests, RemoteOptions(ctx)...); err != nil {
		return err
	}
	m.Signed = true
	return nil
}

// writeReleaseFiles writes release.json, install.yaml and NOTES.md into
// o.Output.
func writeReleaseFiles(ctx context.Context, o Options, m *Record, install []byte) error {
	changes, previous, err := Changes(ctx, o.Root, o.Version)
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	for file, content := range map[string][]byte{
		"release.json": append(raw, '\n'),
		"install.yaml": install,
		"NOTES.md":     Notes(m, changes, previous),
	} {
		if err := os.WriteFile(filepath.Join(o.Output, file), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// publishImage builds img for every platform, pushes the index under the
// version's tag and attaches an SBOM to every platform image.
func publishImage(ctx context.Context, b Builder, img Image, o Options) (Artifact, error) {
	idx, platforms, err := b.Build(ctx, img, o.Platforms)
	if err != nil {
		return Artifact{}, err
	}
	ref, err := PushIndex(ctx, o.Registry+"/"+img.Name+":"+o.Version, idx)
	if err != nil {
		return Artifact{}, err
	}
	fmt.Fprintf(o.Log, "pushed %s\n", ref)
	a := Artifact{Name: img.Name, Kind: "image", Reference: ref.String(), Tag: o.Registry + "/" + img.Name + ":" + o.Version}
	index, err := idx.IndexManifest()
	if err != nil {
		return Artifact{}, err
	}
	for i, p := range platforms {
		desc := index.Manifests[i]
		doc, err := sbom.FromBinary(p.BinaryPath, sbom.Subject{Name: img.Name, Version: o.Version, Platform: p.Platform, Created: o.Epoch})
		if err != nil {
			return Artifact{}, fmt.Errorf("SBOM of %s %s: %w", img.Name, p.Platform, err)
		}
		subject := ref.Context().Digest(desc.Digest.String())
		sbomRef, err := sbom.Attach(ctx, subject, desc, doc, RemoteOptions(ctx)...)
		if err != nil {
			return Artifact{}, fmt.Errorf("attach the SBOM of %s: %w", subject, err)
		}
		a.Platforms = append(a.Platforms, PlatformArtifact{Platform: p.Platform.String(), Digest: desc.Digest.String(), SBOM: sbomRef.DigestStr()})
	}
	return a, nil
}

// PushIndex pushes an image index under a tag and returns its digest
// reference.
func PushIndex(ctx context.Context, tag string, idx v1.ImageIndex) (name.Digest, error) {
	ref, err := name.NewTag(tag)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(ref, idx, RemoteOptions(ctx)...); err != nil {
		return name.Digest{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return ref.Context().Digest(d.String()), nil
}

// publishBundle generates the OLM bundle with the release's digests and
// pushes its image.
func publishBundle(ctx context.Context, o Options, work string, pinned helmchart.Images) (Artifact, error) {
	dir := filepath.Join(work, "olm")
	warnings, err := GenerateBundle(o.Root, dir, pinned)
	if err != nil {
		return Artifact{}, err
	}
	for _, w := range warnings {
		fmt.Fprintln(o.Log, "bundle: warning:", w)
	}
	img, err := olm.BuildBundleImage(filepath.Join(dir, "bundle"), o.Version, o.Epoch)
	if err != nil {
		return Artifact{}, err
	}
	tag, err := name.NewTag(o.Registry + "/" + olm.BundleImage + ":" + o.Version)
	if err != nil {
		return Artifact{}, err
	}
	if err := remote.Write(tag, img, RemoteOptions(ctx)...); err != nil {
		return Artifact{}, fmt.Errorf("push %s: %w", tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Artifact{}, err
	}
	fmt.Fprintf(o.Log, "pushed %s@%s\n", tag, d)
	return Artifact{Name: olm.BundleImage, Kind: "bundle", Reference: tag.Context().Digest(d.String()).String(), Tag: tag.String()}, nil
}

// PushTestImages builds the named test images (TestImages) for the
// platforms and pushes each under <registry>/<name>:<tag>; it returns their
// digest references by name.
func PushTestImages(ctx context.Context, root, registry, tag string, platforms []v1.Platform, names []string, log io.Writer) (map[string]name.Digest, error) {
	work, err := os.MkdirTemp("", "portico-test-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	b := Builder{Root: root, Version: tag, Epoch: time.Unix(0, 0).UTC(), WorkDir: work, Log: log}
	out := map[string]name.Digest{}
	for _, n := range names {
		var img *Image
		for _, known := range TestImages() {
			if known.Name == n {
				img = &known
			}
		}
		if img == nil {
			return nil, fmt.Errorf("unknown test image %q", n)
		}
		idx, _, err := b.Build(ctx, *img, platforms)
		if err != nil {
			return nil, err
		}
		ref, err := PushIndex(ctx, strings.TrimSuffix(registry, "/")+"/"+n+":"+tag, idx)
		if err != nil {
			return nil, err
		}
		out[n] = ref
	}
	return out, nil
}
