#!/usr/bin/env bash
# testbin.sh builds the local test control plane from Go modules only and
# prints the directory holding the binaries. Nothing is downloaded except
# through the Go module proxy.
#
#   hack/testbin.sh            build what is missing, print the directory
#   hack/testbin.sh --path     print the directory without building
#   hack/testbin.sh --node     also build the node binaries (kubelet,
#                              kube-proxy) and the OCI registry
#                              (distribution) the node e2e target needs
#   hack/testbin.sh --olm      print the directory of Operator Lifecycle
#                              Manager's binaries and CRDs (olm-<version>-<key>
#                              beside the control plane's), building them
#                              from hack/tools/olm if missing
#
# Binaries land in ${PORTICO_TESTBIN:-$XDG_CACHE_HOME/portico/testbin}/<key>,
# where <key> changes whenever a pinned version changes, so a warm run only
# checks that the files exist.
set -euo pipefail

KUBE_VERSION=v1.36.3

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=testbin
. "$here/lib.sh"
tools="$here/tools"
root=$(dirname "$here")
# helm is a tool of Portico's own module (go.mod's tool directive), whose
# Helm SDK version it is: built there, it shares the compiled Kubernetes
# client packages with Portico's own build and tests.
HELM_VERSION=$(awk '$1 == "helm.sh/helm/v3" {print $2; exit}' "$root/go.mod")
# The OCI registry of the node tests: distribution's (the reference
# implementation) at the version hack/tools/registry pins, built there with
# its filesystem and in-memory storage drivers only (that module's main.go).
REGISTRY_VERSION=$(awk -v m=github.com/distribution/distribution/v3 \
	'$1 == m {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$tools/registry/go.mod")
[[ "$REGISTRY_VERSION" == v* ]] || die "hack/tools/registry/go.mod does not require github.com/distribution/distribution/v3"
cache_root=${PORTICO_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/portico/testbin}
key=$( (echo "$KUBE_VERSION $HELM_VERSION"; cat "$tools/go.mod" "$tools/go.sum" "$tools"/cmd/*/*.go) | sha256sum | cut -c1-12)
dir="$cache_root/$KUBE_VERSION-$key"

if [[ "${1:-}" == "--path" ]]; then
	echo "$dir"
	exit 0
fi

if [[ "${1:-}" == "--olm" ]]; then
	# OLM's version is the one hack/tools/olm/go.mod pins; the directory
	# changes with that module's go.mod and go.sum and with this block of
	# the script (how it builds), not with edits elsewhere in the file.
	OLM_VERSION=$(awk '$1 == "github.com/operator-framework/operator-lifecycle-manager" {print $2}' "$tools/olm/go.mod")
	olm_key=$( (cat "$tools/olm/go.mod" "$tools/olm/go.sum"; sed -n '/^if \[\[ "${1:-}" == "--olm" \]\]; then$/,/^fi$/p' "$here/testbin.sh") | sha256sum | cut -c1-12)
	olm_dir="$cache_root/olm-$OLM_VERSION-$olm_key"
	if [[ -f "$olm_dir/.complete" ]]; then
		echo "$olm_dir"
		exit 0
	fi
	mkdir -p "$cache_root"
	exec 8>"$cache_root/.olm-$OLM_VERSION.lock"
	flock 8
	if [[ ! -f "$olm_dir/.complete" ]]; then
		rm -rf "$olm_dir.partial" && mkdir -p "$olm_dir.partial"
		mods="$tools/olm"
		# The olm and catalog operators, the package server, and what
		# their bundle-unpack Jobs and catalog pods run: cpb and cp (util
		# image), opm and grpc_health_probe (opm image); copy-content for
		# catalogs that extract their content. One go build: the shared
		# packages compile once.
		log "building OLM $OLM_VERSION, opm, grpc_health_probe and cp (hack/tools/olm)"
		(cd "$mods" && CGO_ENABLED=0 go build -trimpath -tags json1,containers_image_openpgp -ldflags "-s -w" \
			-o "$olm_dir.partial/" \
			github.com/operator-framework/operator-lifecycle-manager/cmd/olm \
			github.com/operator-framework/operator-lifecycle-manager/cmd/catalog \
			github.com/operator-framework/operator-lifecycle-manager/cmd/package-server \
			github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content \
			github.com/operator-framework/operator-lifecycle-manager/util/cpb \
			github.com/operator-framework/operator-registry/cmd/opm \
			github.com/grpc-ecosystem/grpc-health-probe \
			github.com/u-root/u-root/cmds/core/cp)
		mv "$olm_dir.partial/grpc-health-probe" "$olm_dir.partial/grpc_health_probe"
		src=$(cd "$mods" && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager)
		# OLM's own Helm chart (its CRDs in chart/crds) installs it.
		cp -R "$src"/deploy/chart "$olm_dir.partial/chart"
		chmod -R u+w "$olm_dir.partial"
		touch "$olm_dir.partial/.complete"
		rm -rf "$olm_dir" && mv "$olm_dir.partial" "$olm_dir"
	fi
	echo "$olm_dir"
	exit 0
fi

want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl helm)
if [[ "${1:-}" == "--node" ]]; then
	# The registry binary carries its version in its name (not in <key>);
	# coredns is hack/tools/cmd/coredns (the cluster DNS).
	want+=(kubelet kube-proxy coredns "registry-fs-$REGISTRY_VERSION")
fi
# find_missing lists the wanted binaries that are missing in $missing; when
# none is, it prints the directory and exits.
find_missing() {
	missing=()
	local b
	for b in "${want[@]}"; do
		[[ -x "$dir/$b" ]] || missing+=("$b")
	done
	if [[ ${#missing[@]} -eq 0 ]]; then
		echo "$dir"
		exit 0
	fi
}
find_missing

# One build at a time: concurrent callers (parallel test packages, a second
# make) wait for the first and then find the binaries present.
mkdir -p "$cache_root"
exec 8>"$cache_root/.$KUBE_VERSION-$key.lock"
flock 8
find_missing
mkdir -p "$dir.partial"

# Version stamps so the servers and kubectl report the real release.
major=${KUBE_VERSION#v}; major=${major%%.*}
minor=${KUBE_VERSION#v*.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
ldflags="-s -w$stamp"

# etcd and the Kubernetes binaries come from one go build: the packages
# they share compile once and each link overlaps the other compiles.
# (-X of a package a binary does not link is ignored.)
pkgs=()
for b in "${missing[@]}"; do
	case "$b" in
	etcd | coredns) pkgs+=("./cmd/$b") ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
	# kwok is a tool of hack/tools too: its Kubernetes client packages
	# are the control plane's, compiled once.
	kwok | kwokctl) pkgs+=("sigs.k8s.io/kwok/cmd/$b") ;;
	esac
done
if [[ ${#pkgs[@]} -gt 0 ]]; then
	log "building ${pkgs[*]##*/} (Kubernetes $KUBE_VERSION)"
	(cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir.partial/" "${pkgs[@]}")
fi

for b in "${missing[@]}"; do
	case "$b" in
	registry-fs-*)
		log "building distribution's registry $REGISTRY_VERSION (hack/tools/registry: filesystem and in-memory storage only)"
		(cd "$tools/registry" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.partial/$b" .)
		;;
	helm)
		log "building helm $HELM_VERSION (Portico's module)"
		(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
			-o "$dir.partial/helm" helm.sh/helm/v3/cmd/helm)
		;;
	esac
done

mkdir -p "$dir"
for b in "${missing[@]}"; do
	mv -f "$dir.partial/$b" "$dir/$b"
done
rmdir "$dir.partial" 2>/dev/null || true
echo "$dir"
