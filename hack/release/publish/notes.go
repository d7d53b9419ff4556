package publish

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/portico-dev/portico/hack/release/helmchart"
)

// Change is one commit of a release's notes.
type Change struct {
	Hash    string
	Subject string
}

// Changes returns the commits reachable from HEAD since the previous tag
// (the newest v* tag reachable from HEAD other than version), newest
// first, and that tag ("" when there is none: every commit is listed).
func Changes(ctx context.Context, root, version string) ([]Change, string, error) {
	previous, err := git(ctx, root, "describe", "--tags", "--abbrev=0", "--match", "v*", "--exclude", version, "HEAD")
	if err != nil {
		previous = ""
	}
	rangeArg := "HEAD"
	if previous != "" {
		rangeArg = previous + "..HEAD"
	}
	out, err := git(ctx, root, "log", "--no-merges", "--format=%h%x09%s", rangeArg)
	if err != nil {
		return nil, "", err
	}
	var changes []Change
	for _, line := range strings.Split(out, "\n") {
		hash, subject, ok := strings.Cut(line, "\t")
		if ok {
			changes = append(changes, Change{Hash: hash, Subject: subject})
		}
	}
	return changes, previous, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Notes renders a release's notes in Markdown: how to install it, what it
// published (by digest) and the changes since the previous tag.
func Notes(m *Record, changes []Change, previous string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Portico %s\n\n", m.Version)
	fmt.Fprintf(&b, "## Install\n\n```sh\nhelm install portico oci://%s/charts/%s --version %s \\\n  --namespace portico-system --create-namespace\n```\n\n", m.Registry, helmchart.Name, m.Version)
	b.WriteString("or, without Helm: `kubectl apply --server-side -f install.yaml` (attached to this release).\n\n")
	b.WriteString("## Artifacts\n\nEvery image is an OCI image index for " + strings.Join(m.Platforms, " and ") +
		", with a CycloneDX SBOM attached to each platform image as an OCI referrer.\n\n")
	b.WriteString("| artifact | kind | reference |\n|---|---|---|\n")
	for _, a := range m.Artifacts {
		fmt.Fprintf(&b, "| %s | %s | `%s` |\n", a.Name, a.Kind, a.Reference)
	}
	b.WriteString("\n## Changes\n\n")
	if previous != "" {
		fmt.Fprintf(&b, "Since %s:\n\n", previous)
	} else {
		b.WriteString("First release; every commit:\n\n")
	}
	if len(changes) == 0 {
		b.WriteString("- no changes\n")
	}
	for _, c := range changes {
		fmt.Fprintf(&b, "- %s (%s)\n", c.Subject, c.Hash)
	}
	return b.Bytes()
}
