#!/usr/bin/env bash
# traefik.sh builds Traefik, the real Gateway API implementation of the node
# e2e suite and `make run`, from its Go module and prints the binary's path.
# Nothing is downloaded except through the Go module proxy.
#
#   hack/traefik.sh            build it if missing, print its path
#   hack/traefik.sh --path     print the path without building
#
# Traefik's module cannot be built as the proxy serves it: `go install
# …@version` refuses a main module with replace directives, so the module
# zip is copied and built in place, with three changes this script makes
# (its hash is part of the cache key):
#
#   - the nested module github.com/traefik/traefik/dynamic/ext, which
#     go.mod replaces with ./pkg/config/dynamic/ext, is not in the zip (a
#     nested module never is) nor on the proxy: it is written here, the two
#     empty extension points dynamic.HTTP and dynamic.Router embed;
#   - the proxy refuses the go-http-auth fork's pseudo-version go.mod
#     replaces abbot/go-http-auth with: the fork's previous commit (the one
#     Traefik used up to v3.7.9) is used instead;
#   - the proxy refuses the SDK modules of some of lego's DNS providers
#     (ACME DNS-01 challenges, unused here): lego is copied and those
#     providers are dropped from its generated provider switch.
#
# The binary lands in ${XDG_CACHE_HOME:-$HOME/.cache}/portico/traefik/
# <version>-<key>/traefik, with the build's timings in build.txt beside it.
# A cold build downloads about 240 MB of modules and compiles for minutes.
set -euo pipefail

TRAEFIK_VERSION=v3.7.13
# The go-http-auth fork commit the proxy serves.
HTTP_AUTH_VERSION=v0.4.1-0.20200324110947-a37a7636d23e
# lego's DNS providers whose SDK modules the proxy refuses.
LEGO_DROPPED=(alidns aliesa azion dnsimple edgedns edgeone huaweicloud oraclecloud regfish sakuracloud tencentcloud ucloud yandexcloud)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=traefik
. "$here/lib.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico/traefik
key=$(sha256sum "$here/traefik.sh" | cut -c1-12)
dir="$cache_root/$TRAEFIK_VERSION-$key"
bin="$dir/traefik"

case "${1:-}" in
--path)
	echo "$bin"
	exit 0
	;;
"") ;;
*) usage ;;
esac

[[ -x "$bin" ]] && { echo "$bin"; exit 0; }
mkdir -p "$cache_root"
exec 8>"$cache_root/.$TRAEFIK_VERSION-$key.lock"
flock 8
[[ -x "$bin" ]] && { echo "$bin"; exit 0; }

work="$dir.partial"
rm -rf "$work" && mkdir -p "$work"
export CGO_ENABLED=0 GOFLAGS=-trimpath
started=$(date +%s)

log "downloading Traefik $TRAEFIK_VERSION (module proxy)"
module_dir() { go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }
cp -R "$(module_dir "github.com/traefik/traefik/v3@$TRAEFIK_VERSION")" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"

# The nested module dynamic/ext: two empty structs.
mkdir -p pkg/config/dynamic/ext
printf 'module github.com/traefik/traefik/dynamic/ext\n\ngo 1.26.0\n' >pkg/config/dynamic/ext/go.mod
cat >pkg/config/dynamic/ext/ext.go <<'EOF'
// Package ext holds the extension points of Traefik's dynamic configuration
// (empty in the open-source build).
package ext

// HTTP extends dynamic.HTTP.
type HTTP struct{}

// Router extends dynamic.Router.
type Router struct{}
EOF

go mod edit -replace "github.com/abbot/go-http-auth=github.com/containous/go-http-auth@$HTTP_AUTH_VERSION"

# lego without the refused DNS providers: drop their imports, and each case
# of the provider switch whose body returns one of them.
lego_version=$(awk '$1 == "github.com/go-acme/lego/v5" {print $2; exit}' go.mod)
cp -R "$(module_dir "github.com/go-acme/lego/v5@$lego_version")" "$work/lego"
chmod -R u+w "$work/lego"
switch="$work/lego/providers/dns/zz_gen_dns_providers.go"
awk -v dropped="${LEGO_DROPPED[*]}" '
	BEGIN { n = split(dropped, d, " "); for (i = 1; i <= n; i++) drop[d[i]] = 1 }
	match($0, /"github.com\/go-acme\/lego\/v5\/providers\/dns\/[a-z0-9]+"$/) {
		pkg = substr($0, RSTART + 1, RLENGTH - 2); sub(/.*\//, "", pkg)
		if (pkg in drop) next
	}
	pending != "" {
		body = $0; sub(/^[ \t]*return /, "", body); sub(/\..*/, "", body)
		if (!(body in drop)) print pending "\n" $0
		pending = ""; next
	}
	/^[ \t]*case .*:$/ { pending = $0; next }
	{ print }
' "$switch" >"$switch.new"
mv "$switch.new" "$switch"
for p in "${LEGO_DROPPED[@]}"; do
	! grep -q "providers/dns/$p\"\|[^a-z]$p\.NewDNSProvider" "$switch" || die "lego provider $p is still in $switch"
done
go mod edit -replace "github.com/go-acme/lego/v5=$work/lego"

# -mod=mod: go.sum gains the lines of the substituted modules.
GOFLAGS="-trimpath -mod=mod" go list -deps ./cmd/traefik >/dev/null
downloaded=$(date +%s)

log "building Traefik $TRAEFIK_VERSION"
GOFLAGS="-trimpath -mod=mod" go build \
	-ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" \
	-o "$work/traefik" ./cmd/traefik
built=$(date +%s)

cd "$cache_root"
mkdir -p "$dir"
printf 'traefik %s: download and patch %ds, compile %ds, binary %d MiB\n' "$TRAEFIK_VERSION" \
	$((downloaded - started)) $((built - downloaded)) $(($(stat -c %s "$work/traefik") / 1048576)) | tee "$dir/build.txt" >&2
mv "$work/traefik" "$bin"
rm -rf "$work"
echo "$bin"
