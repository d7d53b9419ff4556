#!/usr/bin/env bash
# node.sh runs a local cluster with one REAL node: the control plane of
# hack/cluster.sh (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, all built from Go modules, admission on) plus containerd +
# runc (Debian packages) and a kubelet and kube-proxy built from
# k8s.io/kubernetes like the rest. Pods really run as containers, pulled
# by containerd from a local OCI registry (distribution's registry, built
# from hack/tools/registry, filesystem storage only) that runs beside the node on 127.0.0.1:REGISTRY_PORT:
# push images there (make release REGISTRY=127.0.0.1:5001/portico).
#
#   hack/node.sh up [NAME]            create the cluster, its registry and
#                                     its node (default name "portico-node");
#                                     prints the kubeconfig path as the last
#                                     line
#   hack/node.sh registry [NAME]      print the registry's host:port
#   hack/node.sh down [NAME]          stop the node and the cluster and remove
#                                     every process, mount, interface and
#                                     iptables chain they made
#   hack/node.sh status [NAME]        say whether NAME is running
#
# Needs root (containers, mounts, iptables). Missing Debian packages
# (containerd, runc, containernetworking-plugins, iptables, conntrack,
# iproute2, procps) are installed with apt-get. State and logs live under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/portico/node/NAME/
#
# Network: the API server advertises NODE_IP (a TEST-NET-1 address added to
# the loopback interface, never routed anywhere), so pods reach it through
# the `kubernetes` Service via kube-proxy's iptables rules. Pods live on the
# bridge portico-cni0 with addresses from POD_CIDR. CoreDNS, a host process
# on NODE_IP:53, is the cluster DNS (cluster.local from the API server, other
# names forwarded to the host's resolvers).
# Both are host-wide, so one node cluster runs per host at a time.
#
# Environment: PORTICO_NODE_IP (default 192.0.2.1), PORTICO_POD_CIDR
# (default 10.244.0.0/24), PORTICO_CLUSTER_WAIT (default 180s),
# PORTICO_REGISTRY_PORT (default 5001).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=node
. "$here/lib.sh"
root=$(cd "$here/.." && pwd)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/portico
wait_timeout=${PORTICO_CLUSTER_WAIT:-180s}

NODE_IP=${PORTICO_NODE_IP:-192.0.2.1}
POD_CIDR=${PORTICO_POD_CIDR:-10.244.0.0/24}
SERVICE_IP=10.0.0.1 # first address of kube-apiserver's default service range
BRIDGE_IF=portico-cni0
REGISTRY_ADDR=127.0.0.1:${PORTICO_REGISTRY_PORT:-5001}
PAUSE_TAG=1
PAUSE_IMAGE=$REGISTRY_ADDR/portico/pause:$PAUSE_TAG
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
PROXY_HEALTHZ_PORT=10256
PROXY_METRICS_PORT=10249
DNS_READY_PORT=10253 # CoreDNS's ready plugin, on 127.0.0.1

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
	command -v sysctl >/dev/null || missing+=(procps)
	command -v curl >/dev/null || missing+=(curl)
	[[ ${#missing[@]} -eq 0 ]] && return 0
	command -v apt-get >/dev/null || die "missing ${missing[*]}, and no apt-get to install them"
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
		{ apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

# host_lock serialises node.sh on this host (fd 7): the bridge, NODE_IP and
# kube-proxy's iptables chains are host-wide.
host_lock() {
	mkdir -p "$cache_root/node"
	exec 7>"$cache_root/node/.lock"
	flock --wait 600 7 || die "timed out waiting for $cache_root/node/.lock"
}

# The name of the node cluster running on this host, if any.
active_file() { echo "$cache_root/node/.active"; }

setup_network() {
	# An extra loopback address is local to the host and reachable from
	# the pods' bridge; nothing routes it anywhere else.
	ip addr replace "$NODE_IP/32" dev lo
	# Pods reach Services (and the API server) through the host: forwarding
	# on, bridged traffic through iptables so kube-proxy's rules apply.
	sysctl -qw net.ipv4.ip_forward=1
	if [[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && command -v modprobe >/dev/null; then
		modprobe br_netfilter 2>/dev/null || true
	fi
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null ||
		log "warning: net.bridge.bridge-nf-call-iptables unavailable; pod-to-Service traffic between pods may fail"
}

# update_file writes stdin to FILE unless FILE already has that content;
# on a change it stops a running kube-proxy, which `up` then starts again
# with the new file.
update_file() {
	local tmp
	tmp=$(mktemp)
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then
		rm -f "$tmp"
		return 0
	fi
	mv -f "$tmp" "$1"
	chmod 0644 "$1"
	if running kube-proxy; then
		stop_pidfile kube-proxy
	fi
}

write_configs() {
	mkdir -p "$state"/{containerd/certs.d/"$REGISTRY_ADDR",cni/net.d,kubelet,pod-logs,run,registry}
	# containerd pulls from the local registry over plain HTTP.
	cat >"$state/containerd/certs.d/$REGISTRY_ADDR/hosts.toml" <<-EOF
		server = "http://$REGISTRY_ADDR"
		[host."http://$REGISTRY_ADDR"]
		  capabilities = ["pull", "resolve"]
	EOF
	cat >"$state/registry/config.yml" <<-EOF
		version: 0.1
		log:
		  level: warn
		  accesslog: {disabled: true}
		storage:
		  filesystem: {rootdirectory: $state/registry/data}
		  delete: {enabled: true}
		http:
		  addr: $REGISTRY_ADDR
	EOF
	cat >"$state/containerd/config.toml" <<-EOF
		version = 2
		root = "$state/containerd/root"
		state = "$state/run/containerd"
		[grpc]
		  address = "$sock"
		[ttrpc]
		  address = "$sock.ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  # The machine may lack CAP_SYS_RESOURCE: runc then cannot raise a
		  # container's oom_score_adj above containerd's own and fails with
		  # "can't get final child's PID from pipe".
		  restrict_oom_score_adj = true
		  # Network namespaces under our state dir, not /run/netns, so that
		  # "down" finds and removes exactly ours.
		  netns_mounts_under_state_dir = true
		  enable_selinux = false
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$state/containerd/certs.d"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
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
		    {"type": "portmap", "capabilities": {"portMappings": true}}
		  ]
		}
	EOF
	cat >"$state/kubelet/config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		# Hosts with cgroup v1 and without systemd work too.
		failCgroupV1: false
		cgroupDriver: cgroupfs
		cgroupsPerQOS: false
		enforceNodeAllocatable: []
		failSwapOn: false
		containerRuntimeEndpoint: unix://$sock
		address: $NODE_IP
		port: $KUBELET_PORT
		readOnlyPort: 0
		healthzPort: $KUBELET_HEALTHZ_PORT
		healthzBindAddress: 127.0.0.1
		podLogsDir: $state/pod-logs
		staticPodPath: ""
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: $ca}
		authorization: {mode: Webhook}
		clusterDomain: cluster.local
		clusterDNS: [$NODE_IP]
		resolvConf: /etc/resolv.conf
		serializeImagePulls: false
		# A test node must not evict its pods because the host's disk is full
		# or busy, nor collect the images it cannot pull again.
		evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%"}
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		localStorageCapacityIsolation: false
		protectKernelDefaults: false
		makeIPTablesUtilChains: false
		registerNode: true
		# Pods report Ready soon after their probes pass.
		nodeStatusUpdateFrequency: 10s
		syncFrequency: 10s
	EOF
	cat >"$state/Corefile" <<-EOF
		cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
		    bind $NODE_IP
		    kubernetes cluster.local in-addr.arpa ip6.arpa {
		        kubeconfig $kubeconfig
		        fallthrough in-addr.arpa ip6.arpa
		    }
		    cache 30
		    errors
		    ready 127.0.0.1:$DNS_READY_PORT
		}
		.:53 {
		    bind $NODE_IP
		    forward . /etc/resolv.conf
		    cache 30
		    errors
		}
	EOF
	# kube-proxy exits when its file changes: write it only when the content
	# does (a second `up` reuses the running one), and restart kube-proxy
	# when it had to change.
	update_file "$state/kube-proxy.yaml" <<-EOF
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		mode: iptables
		clientConnection: {kubeconfig: $kubeconfig}
		clusterCIDR: $POD_CIDR
		healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
		metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
		hostnameOverride: $node_name
		# NodePorts on the node address only: no route_localnet sysctl.
		nodePortAddresses: ["$NODE_IP/32"]
		iptables: {localhostNodePorts: false, syncPeriod: 30s, minSyncPeriod: 0s}
		# Leave the host's conntrack table sizes and timeouts alone.
		conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
	EOF
}

# start NAME CMD... runs a daemon in the background with its log and pid
# under $state, in its own session and without the caller's descriptors
# (a test harness waiting for our stdout would otherwise wait forever).
start() {
	local daemon=$1
	shift
	setsid "$@" >"$state/$daemon.log" 2>&1 </dev/null 7>&- 9>&- &
	echo $! >"$state/$daemon.pid"
}

running() { [[ -f "$state/$1.pid" ]] && kill -0 "$(cat "$state/$1.pid")" 2>/dev/null; }

wait_for() {
	local what=$1
	shift
	local deadline=$((SECONDS + ${wait_timeout%s}))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what not ready after $wait_timeout; logs in $state"
		sleep 0.2
	done
}

ctr() { command ctr --address "$sock" --namespace k8s.io "$@"; }
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

cmd_up() {
	need_root
	install_packages
	host_lock
	local active
	active=$(cat "$(active_file)" 2>/dev/null || true)
	if [[ -n "$active" && "$active" != "$name" && -d "$cache_root/node/$active" ]]; then
		die "node cluster $active runs on this host (one at a time); run: hack/node.sh down $active"
	fi
	echo "$name" >"$(active_file)"
	bin=$("$here/testbin.sh" --node)
	export PATH="$bin:$PATH"
	local started=$SECONDS
	setup_network

	log "starting the control plane"
	kubeconfig=$(PORTICO_KWOK_NODES=0 PORTICO_APISERVER_ADVERTISE="$NODE_IP" \
		PORTICO_APISERVER_SANS="$SERVICE_IP,$NODE_IP" PORTICO_ADMISSION=1 \
		"$here/cluster.sh" up "$name" 7>&- | tail -n 1)
	ca=$cache_root/kwok/clusters/$name/pki/ca.crt
	[[ -f "$ca" ]] || die "no cluster CA at $ca"
	mkdir -p "$state"
	write_configs

	if ! running registry; then
		log "starting the registry on $REGISTRY_ADDR"
		start registry "$(registry_bin)" serve "$state/registry/config.yml"
	fi
	wait_for "registry $REGISTRY_ADDR" curl -fsS "http://$REGISTRY_ADDR/v2/"
	push_pause

	if ! running coredns; then
		log "starting CoreDNS on $NODE_IP:53"
		start coredns "$bin/coredns" -conf "$state/Corefile"
	fi
	wait_for "CoreDNS" curl -fsS "http://127.0.0.1:$DNS_READY_PORT/ready"

	if ! running containerd; then
		log "starting containerd"
		start containerd containerd --config "$state/containerd/config.toml"
	fi
	wait_for containerd ctr version

	if ! running kubelet; then
		log "starting kubelet"
		start kubelet "$bin/kubelet" --config "$state/kubelet/config.yaml" --kubeconfig "$kubeconfig" \
			--root-dir "$state/kubelet/root" --cert-dir "$state/kubelet/pki" \
			--hostname-override "$node_name" --node-ip "$NODE_IP" --v 1
	fi
	if ! running kube-proxy; then
		log "starting kube-proxy"
		start kube-proxy "$bin/kube-proxy" --config "$state/kube-proxy.yaml" --v 1
	fi
	wait_for "node $node_name" kubectl wait --for=condition=Ready "node/$node_name" --timeout 5s
	log "node $node_name is ready ($((SECONDS - started))s; logs in $state)"
	echo "$kubeconfig"
}

registry_bin() { ls "$bin"/registry-fs-v* | sort -V | tail -n 1; }

# push_pause builds the sandbox ("pause") image from hack/pause and pushes it
# to the registry, where containerd pulls it like every other image.
push_pause() {
	if curl -fsS -o /dev/null "http://$REGISTRY_ADDR/v2/portico/pause/manifests/$PAUSE_TAG" \
		-H 'Accept: application/vnd.oci.image.index.v1+json'; then
		return 0
	fi
	log "building and pushing the sandbox image $PAUSE_IMAGE"
	(cd "$root" && "$(release_tool release)" test-images --registry "$REGISTRY_ADDR/portico" --tag "$PAUSE_TAG" pause) >&2
}

cmd_registry() { echo "$REGISTRY_ADDR"; }

cmd_status() {
	if [[ -d "$state" ]] && running registry && running containerd && running kubelet && running kube-proxy; then
		echo "node $name is running (state in $state)"
	else
		echo "node $name is not running"
		return 1
	fi
}

# stop_pidfile stops the daemon whose pid we recorded: TERM, then KILL.
stop_pidfile() {
	local daemon=$1 pid
	[[ -f "$state/$daemon.pid" ]] || return 0
	pid=$(cat "$state/$daemon.pid")
	stop_pid "$pid"
	rm -f "$state/$daemon.pid"
}

stop_pid() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 40); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# remove_containers kills every container and sandbox of the node through
# containerd, so their shims exit and their mounts go away.
remove_containers() {
	[[ -S "$sock" ]] || return 0
	local id
	for id in $(ctr tasks ls -q 2>/dev/null); do
		ctr tasks kill -s KILL "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr tasks ls -q 2>/dev/null); do
		for _ in $(seq 1 20); do
			ctr tasks delete "$id" >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
	for id in $(ctr containers ls -q 2>/dev/null); do
		ctr containers delete "$id" >/dev/null 2>&1 || true
	done
}

# stop_shims ends the containerd-shim processes of this node: each wrote
# its pid into its task directory under our state.
stop_shims() {
	local pidfile
	[[ -d "$state/run/containerd" ]] || return 0
	while IFS= read -r pidfile; do
		stop_pid "$(cat "$pidfile")"
	done < <(find "$state/run/containerd" -name shim.pid 2>/dev/null)
}

# unmount_state unmounts everything under the state directory (container
# root filesystems, pod volumes, network namespaces), deepest first.
unmount_state() {
	[[ -d "$state" ]] || return 0
	local m
	while IFS= read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done < <(awk -v s="$state/" 'index($2, s) == 1 { print $2 }' /proc/self/mounts | sort -r)
}

# cleanup_iptables removes the rules and chains kube-proxy, the kubelet and
# the CNI plugins made (KUBE-*, CNI-*), in both address families.
cleanup_iptables() {
	[[ -x "${bin:-}/kube-proxy" ]] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
	local tool table chain
	for tool in iptables ip6tables; do
		command -v "$tool" >/dev/null || continue
		for table in nat filter mangle; do
			"$tool-save" -t "$table" 2>/dev/null | grep -E '^-A .*(KUBE-|CNI-)' | sed 's/^-A/-D/' |
				while read -r rule; do eval "$tool -w -t $table $rule" 2>/dev/null || true; done || true
			for chain in $("$tool" -w -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ { print $2 }'); do
				"$tool" -w -t "$table" -F "$chain" 2>/dev/null || true
			done
			for chain in $("$tool" -w -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ { print $2 }'); do
				"$tool" -w -t "$table" -X "$chain" 2>/dev/null || true
			done
		done
	done
}

# remove_cgroups removes the cgroups runc made for the node's containers
# (under containerd's k8s.io parent); rmdir only removes empty ones.
remove_cgroups() {
	local dir
	for dir in /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io; do
		[[ -d "$dir" ]] || continue
		find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
}

cmd_down() {
	need_root
	host_lock
	bin=$("$here/testbin.sh" --path)
	# The kubelet first, so that it restarts nothing we remove.
	stop_pidfile kubelet
	stop_pidfile kube-proxy
	remove_containers
	stop_pidfile containerd
	stop_pidfile registry
	stop_pidfile coredns
	# Daemons others run beside the node (hack/run.sh's Traefik).
	local pidfile
	for pidfile in "$state"/*.pid; do
		if [[ -f "$pidfile" ]]; then stop_pidfile "$(basename "$pidfile" .pid)"; fi
	done
	stop_shims
	unmount_state
	remove_cgroups
	"$here/cluster.sh" down "$name" 7>&- >&2 || true
	ip link del "$BRIDGE_IF" 2>/dev/null || true
	ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
	cleanup_iptables
	rm -rf "$state"
	[[ "$(cat "$(active_file)" 2>/dev/null)" == "$name" ]] && rm -f "$(active_file)"
	log "node $name removed"
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case "$cmd" in
	up | down | status | registry) [[ $# -le 1 ]] || usage ;;
	*) usage ;;
	esac
	name=${1:-portico-node}
	[[ "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "invalid cluster name: $name"
	state=$cache_root/node/$name
	sock=$state/run/containerd.sock
	node_name=$name
	case "$cmd" in
	up) cmd_up ;;
	down) cmd_down ;;
	registry) cmd_registry ;;
	status) cmd_status ;;
	esac
}

main "$@"
