package sbom

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var created = time.Date(2026, 5, 4, 12, 30, 0, 0, time.UTC)

func hostSubject() Subject {
	return Subject{
		Name:     "portico-operator",
		Version:  "v0.1.0",
		Platform: v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH},
		Created:  created,
	}
}

func decode(t *testing.T, b []byte) *cdx.BOM {
	t.Helper()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("decoding SBOM: %v\n%s", err, b)
	}
	return &bom
}

func property(c *cdx.Component, name string) []string {
	var vs []string
	if c.Properties != nil {
		for _, p := range *c.Properties {
			if p.Name == name {
				vs = append(vs, p.Value)
			}
		}
	}
	return vs
}

func component(bom *cdx.BOM, name string) *cdx.Component {
	for i, c := range *bom.Components {
		if c.Name == name {
			return &(*bom.Components)[i]
		}
	}
	return nil
}

var serialRE = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkCommon checks what every SBOM made by FromBinary has.
func checkCommon(t *testing.T, bom *cdx.BOM, s Subject) {
	t.Helper()
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != cdx.SpecVersion1_6 || bom.Version != 1 {
		t.Errorf("format %q spec %v version %d, want CycloneDX 1.6 version 1", bom.BOMFormat, bom.SpecVersion, bom.Version)
	}
	if !serialRE.MatchString(bom.SerialNumber) {
		t.Errorf("serialNumber %q is not a UUIDv5 URN", bom.SerialNumber)
	}
	md := bom.Metadata
	if md == nil || md.Component == nil {
		t.Fatal("no metadata.component")
	}
	if md.Timestamp != s.Created.UTC().Format(time.RFC3339) {
		t.Errorf("timestamp %q, want %q", md.Timestamp, s.Created.UTC().Format(time.RFC3339))
	}
	if md.Tools == nil || md.Tools.Components == nil {
		t.Fatal("no metadata.tools.components")
	}
	var tools []string
	for _, c := range *md.Tools.Components {
		tools = append(tools, c.Name)
	}
	if !slices.Equal(tools, []string{"portico-release", "cyclonedx-go"}) {
		t.Errorf("tools %v", tools)
	}
	app := md.Component
	if app.Type != cdx.ComponentTypeApplication || app.Name != s.Name || app.Version != s.Version {
		t.Errorf("metadata.component = %s %s %s", app.Type, app.Name, app.Version)
	}
	if got := property(app, "cdx:gomod:build:env:GOVERSION"); len(got) != 1 || !strings.HasPrefix(got[0], "go1.") {
		t.Errorf("GOVERSION property %v", got)
	}

	if bom.Components == nil || len(*bom.Components) == 0 {
		t.Fatal("no components")
	}
	var refs []string
	for _, c := range *bom.Components {
		if c.Type != cdx.ComponentTypeLibrary {
			t.Errorf("component %s has type %s", c.Name, c.Type)
		}
		refs = append(refs, c.BOMRef)
	}
	if !slices.IsSortedFunc(*bom.Components, func(a, b cdx.Component) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("components are not sorted by name")
	}
	if std := component(bom, "stdlib"); std == nil || !strings.HasPrefix(std.PackageURL, "pkg:golang/stdlib@1.") {
		t.Errorf("stdlib component %+v", std)
	}
	if bom.Dependencies == nil || len(*bom.Dependencies) != 1 {
		t.Fatalf("dependencies %+v, want one entry", bom.Dependencies)
	}
	dep := (*bom.Dependencies)[0]
	if dep.Ref != app.BOMRef || dep.Dependencies == nil || !slices.Equal(*dep.Dependencies, refs) {
		t.Errorf("dependencies %+v, want %s → %v", dep, app.BOMRef, refs)
	}
}

// checkModules checks that every module in the build info of binary is a
// component with a pkg:golang purl and the go.sum hash.
func checkModules(t *testing.T, bom *cdx.BOM, binary string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if len(*bom.Components) != len(bi.Deps)+1 { // + stdlib
		t.Errorf("%d components for %d modules", len(*bom.Components), len(bi.Deps))
	}
	for _, m := range bi.Deps {
		if m.Replace != nil {
			continue
		}
		c := component(bom, m.Path)
		if c == nil {
			t.Errorf("module %s missing", m.Path)
			continue
		}
		if want := "pkg:golang/" + m.Path + "@" + strings.ReplaceAll(m.Version, "+", "%2B"); c.PackageURL != want || c.BOMRef != want {
			t.Errorf("%s: purl %q bom-ref %q, want %q", m.Path, c.PackageURL, c.BOMRef, want)
		}
		if c.Version != m.Version {
			t.Errorf("%s: version %q, want %q", m.Path, c.Version, m.Version)
		}
		if got := property(c, "portico:go:module:sum"); !slices.Equal(got, []string{m.Sum}) {
			t.Errorf("%s: sum %v, want %s", m.Path, got, m.Sum)
		}
	}
}

// The test binary has build info for this module.
func TestFromBinaryTestExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := hostSubject()
	b, err := FromBinary(exe, s)
	if err != nil {
		t.Fatal(err)
	}
	bom := decode(t, b)
	checkCommon(t, bom, s)

	app := bom.Metadata.Component
	if want := "pkg:golang/github.com/portico-dev/portico/hack/release@v0.1.0#sbom.test"; app.PackageURL != want {
		t.Errorf("application purl %q, want prefix %q", app.PackageURL, want)
	}
	if got := property(app, "portico:image:platform"); !slices.Equal(got, []string{runtime.GOOS + "/" + runtime.GOARCH}) {
		t.Errorf("platform property %v", got)
	}

	// Test binaries record no dependency modules (TestFromBinaryBuiltProgram
	// covers those), so stdlib is the only component.
	checkModules(t, bom, exe)

	again, err := FromBinary(exe, s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("second FromBinary call gave different bytes")
	}

	// Another subject gives another serial number.
	s.Version = "v0.1.1"
	other, err := FromBinary(exe, s)
	if err != nil {
		t.Fatal(err)
	}
	if decode(t, other).SerialNumber == bom.SerialNumber {
		t.Error("different SBOMs have the same serialNumber")
	}
}

// A program built the way release binaries are: cross-compiled, trimmed,
// with ldflags and tags, and a module replaced by a local directory.
func TestFromBinaryBuiltProgram(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", `module example.com/tiny

go 1.26

require (
	example.com/local v1.2.3
	github.com/CycloneDX/cyclonedx-go v0.12.0
)

replace example.com/local => ./local
`)
	// The go.sum of this module has cyclonedx-go's hashes; the module
	// cache has its source (this test imports it), so no network is needed.
	sums, err := os.ReadFile(mainGoSum(t, goTool))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sums))
	write("cmd/tiny/main.go", `package main

import (
	"fmt"

	"example.com/local"
	cdx "github.com/CycloneDX/cyclonedx-go"
)

var version = "dev"

func main() { fmt.Println(local.Hello, version, cdx.NewBOM().BOMFormat) }
`)
	write("local/go.mod", "module example.com/local\n\ngo 1.22\n")
	write("local/local.go", "package local\n\nconst Hello = \"hello\"\n")

	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command(goTool, "build", "-trimpath", "-tags=netgo,osusergo",
		"-ldflags=-s -w -X main.version=v0.1.0", "-o", bin, "./cmd/tiny")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0",
		"GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	s := Subject{
		Name:     "tiny",
		Version:  "v0.1.0",
		Platform: v1.Platform{OS: "linux", Architecture: "arm64"},
		Created:  created,
	}
	b, err := FromBinary(bin, s)
	if err != nil {
		t.Fatal(err)
	}
	bom := decode(t, b)
	checkCommon(t, bom, s)

	app := bom.Metadata.Component
	if want := "pkg:golang/example.com/tiny@v0.1.0#cmd/tiny"; app.PackageURL != want {
		t.Errorf("application purl %q, want %q", app.PackageURL, want)
	}
	for prop, want := range map[string][]string{
		"cdx:gomod:build:env:GOOS":            {"linux"},
		"cdx:gomod:build:env:GOARCH":          {"arm64"},
		"cdx:gomod:build:env:CGO_ENABLED":     {"0"},
		"cdx:gomod:build:tag":                 {"netgo", "osusergo"},
		"portico:go:build:setting:-ldflags":   nil, // not recorded with -trimpath (go.dev/issue/52372)
		"portico:go:build:setting:-trimpath":  {"true"},
		"portico:go:build:setting:-buildmode": {"exe"},
		"portico:go:package":                  {"example.com/tiny/cmd/tiny"},
		"portico:image:platform":              {"linux/arm64"},
		"portico:go:module:version":           nil, // (devel)
	} {
		if got := property(app, prop); !slices.Equal(got, want) {
			t.Errorf("property %s = %q, want %q", prop, got, want)
		}
	}

	local := component(bom, "example.com/local")
	if local == nil {
		t.Fatalf("locally replaced module missing from %s", b)
	}
	if local.Version != "" || local.PackageURL != "" || local.BOMRef != "gomod-local:example.com/local" {
		t.Errorf("local module: version %q purl %q bom-ref %q", local.Version, local.PackageURL, local.BOMRef)
	}
	if got := property(local, "portico:go:module:replace-dir"); !slices.Equal(got, []string{"./local"}) {
		t.Errorf("replace-dir %v", got)
	}
	checkModules(t, bom, bin)
	cyclonedx := component(bom, "github.com/CycloneDX/cyclonedx-go")
	if cyclonedx == nil || cyclonedx.PackageURL != "pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.12.0" {
		t.Errorf("cyclonedx-go component %+v", cyclonedx)
	}

	again, err := FromBinary(bin, s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("second FromBinary call gave different bytes")
	}

	// The binary is for linux/arm64, not for another platform.
	s.Platform = v1.Platform{OS: "linux", Architecture: "amd64"}
	if _, err := FromBinary(bin, s); err == nil || !strings.Contains(err.Error(), "linux/arm64") {
		t.Errorf("FromBinary for the wrong platform: %v", err)
	}
}

// Replacements and version encodings that the built programs don't cover.
func TestNewBOMModules(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8 X:boringcrypto",
		Path:      "github.com/portico-dev/portico/operator",
		Main:      debug.Module{Path: "github.com/portico-dev/portico", Version: "v0.1.0-rc.1"},
		Deps: []*debug.Module{
			{Path: "github.com/docker/cli", Version: "v29.7.2+incompatible", Sum: "h1:docker="},
			{Path: "example.com/upstream", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: "h1:fork="}},
			{Path: "example.com/other", Version: "v2.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1", Sum: "h1:fork="}},
			{Path: "example.com/a", Version: "v0.0.0-20260101000000-0123456789ab", Sum: "h1:a="},
		},
		Settings: []debug.BuildSetting{
			{Key: "-ldflags", Value: `-s -w -X "main.version=v0.1.0 <rc>"`},
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOOS", Value: "linux"},
			{Key: "GOARCH", Value: "amd64"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
		},
	}
	s := Subject{Name: "portico-operator", Version: "v0.1.0", Created: created}
	bom, err := newBOM(bi, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encode(bom)
	if err != nil {
		t.Fatal(err)
	}
	bom = decode(t, b)
	checkCommon(t, bom, s)

	app := bom.Metadata.Component
	if want := "pkg:golang/github.com/portico-dev/portico@v0.1.0#operator"; app.PackageURL != want {
		t.Errorf("application purl %q, want %q", app.PackageURL, want)
	}
	if got := property(app, "portico:go:module:version"); !slices.Equal(got, []string{"v0.1.0-rc.1"}) {
		t.Errorf("module version property %v", got)
	}
	for prop, want := range map[string][]string{
		"portico:image:platform":                {}, // no Subject.Platform
		"cdx:gomod:build:env:GOVERSION":         {"go1.26.8 X:boringcrypto"},
		"cdx:gomod:build:env:CGO_ENABLED":       {"0"},
		"portico:go:build:setting:-ldflags":     {`-s -w -X "main.version=v0.1.0 <rc>"`},
		"portico:go:build:setting:vcs.revision": {"0123456789abcdef"},
	} {
		if got := property(app, prop); !slices.Equal(got, want) {
			t.Errorf("property %s = %q, want %q", prop, got, want)
		}
	}
	if !bytes.Contains(b, []byte(`"-s -w -X \"main.version=v0.1.0 <rc>\""`)) {
		t.Errorf("ldflags are not written verbatim:\n%s", b)
	}

	var names, purls []string
	for _, c := range *bom.Components {
		names = append(names, c.Name+"@"+c.Version)
		purls = append(purls, c.PackageURL)
	}
	if want := []string{
		"example.com/a@v0.0.0-20260101000000-0123456789ab",
		"example.com/fork@v1.0.1",
		"github.com/docker/cli@v29.7.2+incompatible",
		"stdlib@go1.26.8",
	}; !slices.Equal(names, want) {
		t.Errorf("components %q, want %q", names, want)
	}
	if want := []string{
		"pkg:golang/example.com/a@v0.0.0-20260101000000-0123456789ab",
		"pkg:golang/example.com/fork@v1.0.1",
		"pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible",
		"pkg:golang/stdlib@1.26.8",
	}; !slices.Equal(purls, want) {
		t.Errorf("purls %q, want %q", purls, want)
	}
	fork := component(bom, "example.com/fork")
	if got := property(fork, "portico:go:module:replaces"); !slices.Equal(got, []string{"example.com/other@v2.0.0", "example.com/upstream@v1.0.0"}) {
		t.Errorf("replaces %v", got)
	}
	if got := property(fork, "portico:go:module:sum"); !slices.Equal(got, []string{"h1:fork="}) {
		t.Errorf("fork sum %v", got)
	}
}

func TestFromBinaryErrors(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := hostSubject()
	s.Created = time.Time{}
	if _, err := FromBinary(exe, s); err == nil {
		t.Error("no error without a creation time")
	}
	s = hostSubject()
	s.Version = ""
	if _, err := FromBinary(exe, s); err == nil {
		t.Error("no error without a version")
	}
	notGo := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FromBinary(notGo, hostSubject()); err == nil {
		t.Error("no error for a file that is not a Go binary")
	}
}

func TestAttachFind(t *testing.T) {
	for _, referrersAPI := range []bool{true, false} {
		mode := "fallback-tag"
		if referrersAPI {
			mode = "referrers-api"
		}
		t.Run(mode, func(t *testing.T) {
			srv := httptest.NewServer(registry.New(
				registry.WithReferrersSupport(referrersAPI),
				registry.Logger(log.New(io.Discard, "", 0)),
			))
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			ctx := context.Background()

			subject, desc := pushRandomImage(t, host+"/portico/operator")
			other, _ := pushRandomImage(t, host+"/portico/operator")

			if got, err := Find(ctx, subject); err != nil || len(got) != 0 {
				t.Fatalf("Find before Attach = %d SBOMs, %v; want none", len(got), err)
			}

			sbom := []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","version":1}`)
			ref, err := Attach(ctx, subject, desc, sbom)
			if err != nil {
				t.Fatal(err)
			}
			// Some other referrer (e.g. a signature bundle) is not an SBOM.
			pushReferrer(t, subject, desc, "application/vnd.dev.sigstore.bundle.v0.3+json")

			got, err := Find(ctx, subject)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !bytes.Equal(got[0], sbom) {
				t.Fatalf("Find = %q, want [%s]", got, sbom)
			}

			// The referrer manifest is an OCI 1.1 artifact.
			rd, err := remote.Get(ref)
			if err != nil {
				t.Fatal(err)
			}
			var m v1.Manifest
			if err := json.Unmarshal(rd.Manifest, &m); err != nil {
				t.Fatal(err)
			}
			if m.MediaType != types.OCIManifestSchema1 || m.ArtifactType != ArtifactType {
				t.Errorf("referrer mediaType %s artifactType %s", m.MediaType, m.ArtifactType)
			}
			if m.Config.MediaType != types.OCIEmptyJSON || m.Config.Size != 2 ||
				m.Config.Digest.String() != "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
				t.Errorf("referrer config %+v, want the empty descriptor", m.Config)
			}
			if len(m.Layers) != 1 || m.Layers[0].MediaType != ArtifactType || m.Layers[0].Size != int64(len(sbom)) {
				t.Errorf("referrer layers %+v", m.Layers)
			}
			if m.Subject == nil || m.Subject.Digest != desc.Digest || m.Subject.MediaType != desc.MediaType || m.Subject.Size != desc.Size {
				t.Errorf("referrer subject %+v, want %+v", m.Subject, desc)
			}

			// Without the referrers API, the referrer is listed by the fallback tag.
			fallback := subject.Context().Tag(strings.Replace(subject.DigestStr(), ":", "-", 1))
			fd, err := remote.Get(fallback)
			if referrersAPI {
				if err == nil {
					t.Errorf("fallback tag %s exists although the registry has the referrers API", fallback)
				}
			} else {
				if err != nil {
					t.Fatalf("fallback tag: %v", err)
				}
				idx, err := fd.ImageIndex()
				if err != nil {
					t.Fatal(err)
				}
				im, err := idx.IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(im.Manifests, func(d v1.Descriptor) bool {
					return d.Digest.String() == ref.DigestStr() && d.ArtifactType == ArtifactType
				}) {
					t.Errorf("fallback index %+v does not list %s", im.Manifests, ref)
				}
			}

			// Attaching the same SBOM again changes nothing.
			again, err := Attach(ctx, subject, desc, sbom)
			if err != nil {
				t.Fatal(err)
			}
			if again != ref {
				t.Errorf("second Attach gave %s, want %s", again, ref)
			}
			if got, err := Find(ctx, subject); err != nil || len(got) != 1 {
				t.Errorf("Find after second Attach = %d SBOMs, %v; want 1", len(got), err)
			}

			// Another image has no SBOM; nor has an image in another repository.
			if got, err := Find(ctx, other); err != nil || len(got) != 0 {
				t.Errorf("Find on an image without SBOM = %d SBOMs, %v; want none", len(got), err)
			}
			elsewhere, err := name.NewDigest(host + "/portico/controllers@" + subject.DigestStr())
			if err != nil {
				t.Fatal(err)
			}
			if got, err := Find(ctx, elsewhere); err != nil || len(got) != 0 {
				t.Errorf("Find in an empty repository = %d SBOMs, %v; want none", len(got), err)
			}
		})
	}
}

func TestAttachRejectsWrongDescriptor(t *testing.T) {
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := name.NewDigest("registry.invalid/portico/operator@sha256:" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(context.Background(), subject, *desc, []byte("{}")); err == nil {
		t.Error("no error for a descriptor of another manifest")
	}
}

// mainGoSum is the go.sum of the module under test.
func mainGoSum(t *testing.T, goTool string) string {
	t.Helper()
	out, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not in a module")
	}
	return filepath.Join(filepath.Dir(gomod), "go.sum")
}

func pushRandomImage(t *testing.T, repo string) (name.Digest, v1.Descriptor) {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(repo + ":v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		t.Fatal(err)
	}
	return tag.Context().Digest(desc.Digest.String()), *desc
}

// pushReferrer attaches an unrelated artifact to subject.
func pushReferrer(t *testing.T, subject name.Digest, desc v1.Descriptor, artifactType string) {
	t.Helper()
	opts := []remote.Option{remote.WithContext(context.Background())}
	if _, err := putArtifact(subject, desc, artifactType, []byte(`{"not":"an sbom"}`), nil, opts); err != nil {
		t.Fatal(err)
	}
}
