#!/usr/bin/env bash
# node.sh runs a local cluster with one REAL node: the control plane of
# hack/cluster.sh (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, all built from Go modules) plus containerd + runc (Debian
# packages) and a kubelet and kube-proxy built from k8s.io/kubernetes like
# the rest. Pods really run as containers; images come from local archives
# (make images), never from a registry.
#
#   hack/node.sh up [NAME]            create the cluster and its node (default
#                                     name "portico-node"); prints the
#                                     kubeconfig path as the last line
#   hack/node.sh load NAME ARCHIVE... import image archives into the node
#   hack/node.sh down [NAME]          stop the node and the cluster and remove
#                                     every process, mount, interface and
#                                     iptables chain they made
#
# Needs root (containers, mounts, iptables). Missing Debian packages are
# installed with apt-get. State lives under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/portico/node/NAME/
#
# Network: the API server advertises NODE_IP (a TEST-NET-1 address added to
# the loopback interface, never routed anywhere), so pods reach it through
# the `kubernetes` Service via kube-proxy's iptables rules. Pods live on a
# bridge (portico-cni0) with addresses from POD_CIDR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico
wait_timeout=${PORTICO_CLUSTER_WAIT:-180s}

NODE_IP=${PORTICO_NODE_IP:-192.0.2.1}
POD_CIDR=${PORTICO_POD_CIDR:-10.244.0.0/24}
SERVICE_IP=10.0.0.1 # first address of kube-apiserver's default service range
BRIDGE_IF=portico-cni0
PAUSE_IMAGE=portico.local/pause:1

log() { echo "node: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

need_root() { [[ $(id -u) -eq 0 ]] || die "must run as root (containers, mounts and iptables)"; }

# install_packages installs the Debian packages of the node when missing.
install_packages() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	command -v ip >/dev/null || missing+=(iproute2)
	[[ ${#missing[@]} -eq 0 ]] && return 0
	log "installing Debian packages: ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
		{ DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

setup_network() {
	# The kernel may lack the dummy link type; an extra loopback address
	# works the same for local delivery.
	ip addr replace "$NODE_IP/32" dev lo
	# kube-proxy marks and NATs; forwarding is needed for pod-to-pod traffic
	# through Service addresses.
	sysctl -qw net.ipv4.ip_forward=1 || true
	modprobe br_netfilter 2>/dev/null || true
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

write_configs() {
	mkdir -p "$state"/{containerd,cni/net.d,kubelet,pods-logs,run}
	cat >"$state/containerd/config.toml" <<-EOF
		version = 2
		root = "$state/containerd/root"
		state = "$state/run/containerd"
		[grpc]
		  address = "$sock"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  # The machine lacks CAP_SYS_RESOURCE: runc cannot raise a container's
		  # oom_score_adj above the daemon's own.
		  restrict_oom_score_adj = true
		  enable_selinux = false
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$state/cni/net.d"
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$state/containerd/opt"
	EOF
	cat >"$state/cni/net.d/10-portico.conflist" <<-EOF
		{
		  "cniVersion": "0.4.0",
		  "name": "portico",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "$BRIDGE_IF",
		      "isGateway": true,
		      "ipMasq": true,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "$state/cni/ipam",
		        "ranges": [[{"subnet": "$POD_CIDR"}]],
		        "routes": [{"dst": "0.0.0.0/0"}]
		      }
		    },
		    {"type": "portmap", "capabilities": {"portMappings": true}},
		    {"type": "loopback"}
		  ]
		}
	EOF
	cat >"$state/kubelet/config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		# This machine has cgroup v1 and no systemd.
		failCgroupV1: false
		cgroupDriver: cgroupfs
		cgroupsPerQOS: false
		enforceNodeAllocatable: []
		failSwapOn: false
		containerRuntimeEndpoint: unix://$sock
		address: $NODE_IP
		port: $kubelet_port
		readOnlyPort: 0
		healthzPort: $kubelet_healthz_port
		healthzBindAddress: 127.0.0.1
		podLogsDir: $state/pods-logs
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $ca}
		authorization: {mode: Webhook}
		clusterDomain: cluster.local
		resolvConf: /etc/resolv.conf
		serializeImagePulls: false
		# A test node must not evict its pods because the disk is busy.
		evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%"}
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		localStorageCapacityIsolation: false
		protectKernelDefaults: false
		makeIPTablesUtilChains: false
		registerNode: true
	EOF
	cat >"$state/kube-proxy.yaml" <<-EOF
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		mode: iptables
		clientConnection: {kubeconfig: $kubeconfig}
		clusterCIDR: $POD_CIDR
		bindAddress: 127.0.0.1
		healthzBindAddress: 127.0.0.1:$proxy_healthz_port
		metricsBindAddress: 127.0.0.1:$proxy_metrics_port
		hostnameOverride: $node_name
		# Leave the host's conntrack table sizes alone.
		conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
	EOF
}

# start NAME CMD... runs a daemon in the background with its log and pid
# under $state, detached from the caller's descriptors.
start() {
	local name=$1
	shift
	setsid "$@" >"$state/$name.log" 2>&1 </dev/null 9>&- &
	echo $! >"$state/$name.pid"
}

running() { [[ -f "$state/$1.pid" ]] && kill -0 "$(cat "$state/$1.pid")" 2>/dev/null; }

wait_for() {
	local what=$1
	shift
	local deadline=$((SECONDS + ${wait_timeout%s}))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what not ready after $wait_timeout; logs in $state"
		sleep 0.5
	done
}

ctr() { command ctr --address "$sock" --namespace k8s.io "$@"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cmd_up() {
	need_root
	install_packages
	bin=$("$here/testbin.sh" --node)
	export PATH="$bin:$PATH"
	setup_network

	log "starting the control plane"
	kubeconfig=$(PORTICO_KWOK_NODES=0 PORTICO_APISERVER_ADVERTISE="$NODE_IP" \
		PORTICO_APISERVER_SANS="$SERVICE_IP,$NODE_IP" PORTICO_ADMISSION=1 "$here/cluster.sh" up "$name" | tail -n 1)
	ca=$(dirname "$(readlink -f "$cache_root/kwok/clusters/$name/pki/ca.crt")")/ca.crt
	[[ -f "$ca" ]] || die "no cluster CA at $ca"
	mkdir -p "$state"
	kubelet_port=$(free_port)
	kubelet_healthz_port=$(free_port)
	proxy_healthz_port=$(free_port)
	proxy_metrics_port=$(free_port)
	write_configs

	if ! running containerd; then
		log "starting containerd"
		start containerd containerd --config "$state/containerd/config.toml"
	fi
	wait_for containerd ctr version
	import_pause || log "WARNING: no sandbox image"

	if ! running kubelet; then
		log "starting kubelet"
		start kubelet "$bin/kubelet" --config "$state/kubelet/config.yaml" --kubeconfig "$kubeconfig" \
			--root-dir "$state/kubelet/root" --cert-dir "$state/kubelet/pki" \
			--hostname-override "$node_name" --node-ip "$NODE_IP" --v 2
	fi
	if ! running kube-proxy; then
		log "starting kube-proxy"
		start kube-proxy "$bin/kube-proxy" --config "$state/kube-proxy.yaml"
	fi
	wait_for "node $node_name" "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$node_name" --timeout 5s
	log "node $node_name is ready ($SECONDS s)"
	echo "$kubeconfig"
}

# import_pause builds the sandbox ("pause") image from hack/pause and imports
# it: pods need it before any container starts.
import_pause() {
	if ctr images check "name==$PAUSE_IMAGE" 2>/dev/null | grep -q "$PAUSE_IMAGE"; then
		return 0
	fi
	log "importing the sandbox image $PAUSE_IMAGE"
	local archive="$state/pause.tar"
	(cd "$here/.." && go run ./hack/images --only pause --reference "$PAUSE_IMAGE" --output "$archive") >&2
	ctr images import --no-unpack=false "$archive" >&2
}

cmd_load() {
	need_root
	[[ -S "$sock" ]] || die "node $name is not running"
	local archive
	for archive in "$@"; do
		log "importing $archive"
		ctr images import "$archive" >&2
	done
}

stop_pidfile() {
	local name=$1 pid
	[[ -f "$state/$name.pid" ]] || return 0
	pid=$(cat "$state/$name.pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$state/$name.pid"
}

cmd_down() {
	need_root
	if [[ -S "$sock" ]]; then
		# Containers first, while containerd still knows them.
		local task
		for task in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s KILL "$task" >/dev/null 2>&1 || true; done
	fi
	stop_pidfile kube-proxy
	stop_pidfile kubelet
	stop_pidfile containerd
	# containerd-shim processes outlive containerd by design.
	pkill -KILL -f "containerd-shim.*$state" 2>/dev/null || true
	pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io -address $sock" 2>/dev/null || true
	# Every mount under the state directory (overlay rootfs, pod volumes,
	# sandbox namespaces), deepest first.
	if [[ -d "$state" ]]; then
		local m
		for m in $(awk -v s="$state" 'index($2, s) == 1 { print $2 }' /proc/self/mounts | sort -r); do
			umount -l "$m" 2>/dev/null || true
		done
	fi
	"$here/cluster.sh" down "$name" >&2 || true
	ip link del "$BRIDGE_IF" 2>/dev/null || true
	ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
	cleanup_iptables
	rm -rf "$state"
	log "node $name removed"
}

# cleanup_iptables removes the chains kube-proxy and the CNI plugins made.
cleanup_iptables() {
	local table chain
	for table in nat filter mangle; do
		iptables-save -t "$table" 2>/dev/null | grep -E '^-A .*(KUBE-|CNI-)' | sed 's/^-A/-D/' |
			while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done
		for chain in $(iptables -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ { print $2 }'); do
			iptables -t "$table" -F "$chain" 2>/dev/null || true
		done
		for chain in $(iptables -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ { print $2 }'); do
			iptables -t "$table" -X "$chain" 2>/dev/null || true
		done
	done
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case "$cmd" in
	up | down) [[ $# -le 1 ]] || usage ;;
	load) [[ $# -ge 2 ]] || usage ;;
	*) usage ;;
	esac
	name=${1:-portico-node}
	[[ "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "invalid cluster name: $name"
	[[ $cmd == load ]] && shift
	state=$cache_root/node/$name
	sock=$state/run/containerd.sock
	node_name=$name
	case "$cmd" in
	up) cmd_up ;;
	down) cmd_down ;;
	load) cmd_load "$@" ;;
	esac
}

main "$@"
