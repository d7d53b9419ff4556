#!/usr/bin/env bash
# redis.sh prints the path of a redis-server 7.x binary for the rate-limit
# service's benchmark and manual tests, installing nothing system-wide and
# starting no service.
#
#   hack/redis.sh            fetch it if missing, print its path
#   hack/redis.sh --path     print the path without fetching
#
# A redis-server 7.x on PATH is used as it is. Otherwise Debian's package
# (bookworm: 5:7.0.15) is fetched with `apt-get download` together with the
# libraries it links that the machine does not have installed, unpacked
# with `dpkg-deb -x` into
# ${XDG_CACHE_HOME:-$HOME/.cache}/portico/redis-<version>/, and the printed
# path is a wrapper there that sets LD_LIBRARY_PATH. No root needed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=redis
. "$here/lib.sh"
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico

case "${1:-}" in
--path | "") ;;
*) usage ;;
esac

# A redis-server 7.x on PATH wins.
if system=$(command -v redis-server 2>/dev/null) && "$system" --version 2>/dev/null | grep -q ' v=7\.'; then
	echo "$system"
	exit 0
fi

command -v apt-get >/dev/null || die "no redis-server 7.x on PATH and no apt-get to fetch Debian's"
version=$(apt-cache policy redis-server | awk '$1 == "Candidate:" {print $2}')
[[ -n "$version" && "$version" != "(none)" ]] || die "apt knows no redis-server package (run apt-get update)"
[[ "$version" =~ ^([0-9]+:)?7\. ]] || die "the apt candidate redis-server $version is not 7.x"
dir="$cache_root/redis-${version#*:}"
wrapper="$dir/redis-server"

if [[ "${1:-}" == "--path" ]]; then
	echo "$wrapper"
	exit 0
fi
[[ -x "$wrapper" ]] && { echo "$wrapper"; exit 0; }
mkdir -p "$cache_root"
exec 8>"$cache_root/.redis.lock"
flock 8
[[ -x "$wrapper" ]] && { echo "$wrapper"; exit 0; }

work="$dir.partial"
rm -rf "$work" && mkdir -p "$work/debs"
# The libraries redis-tools depends on (the first of each alternative)
# that are not installed here; redis-server itself only holds scripts and a
# symbolic link to redis-tools' binary.
missing=()
while read -r dep; do
	[[ "$(dpkg-query -W -f='${Status}' "$dep" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$dep")
done < <(apt-cache depends redis-tools | awk '$1 == "Depends:" && $2 ~ /^lib/ && !seen[$2]++ {print $2}')
log "downloading redis-server $version, redis-tools and ${missing[*]:-no libraries} (apt-get download)"
(cd "$work/debs" && apt-get download -q "redis-server=$version" "redis-tools=$version" "${missing[@]}" >&2) ||
	die "apt-get download failed"
for deb in "$work"/debs/*.deb; do
	dpkg-deb -x "$deb" "$work/root"
done

# The server takes its role from argv[0]: run it through the link's name.
libs="$dir/root/usr/lib/$(uname -m)-linux-gnu:$dir/root/usr/lib"
cat >"$work/redis-server" <<EOF
#!/bin/sh
# redis-server $version unpacked by hack/redis.sh.
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dir/root/usr/bin/redis-server" "\$@"
EOF
chmod +x "$work/redis-server"
rm -rf "$work/debs" "$dir"
mv "$work" "$dir"
if LD_LIBRARY_PATH="$libs" ldd "$dir/root/usr/bin/redis-check-rdb" | grep -q 'not found'; then
	LD_LIBRARY_PATH="$libs" ldd "$dir/root/usr/bin/redis-check-rdb" | grep 'not found' >&2
	rm -rf "$dir"
	die "redis-server lacks libraries"
fi
"$wrapper" --version >/dev/null || { rm -rf "$dir"; die "redis-server does not run"; }
echo "$wrapper"
