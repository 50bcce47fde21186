# shellcheck shell=bash
# vm.bash: nodes that are real QEMU virtual machines, for bats/vm/*.bats
# (make e2e-vm, make e2e-vm-smoke; docs/e2e.md "On real VMs"). Root only.
#
# Each VM boots the base image of scripts/vm-image (Debian 12, its own kernel
# and GRUB) from a copy-on-write overlay, under TCG (software emulation), with
# 512 MiB and one CPU. The test's network namespace crd-e2e-vm-PID holds a
# bridge, one tap per VM and the etcd members; every process of the run
# (QEMU, etcd, the readers below, ssh) runs inside it, so nothing is sent from
# the root namespace and scripts/vm-sweep can remove a run that was killed.
#
# What the host sees of each VM, kept outside the VM (in $VM_DIR/NAME):
#   console.log   the serial console (ttyS0): GRUB, the kernel, systemd
#   ledger.raw    "HOST_TIME LINE" for every line the VM writes to its second
#                 serial port (ttyS1): "up BOOT_ID KERNEL" when clusterrebootd
#                 became ready, "down BOOT_ID" when the machine starts going
#                 down, and the kernel hook's "held"/"released"/"grub-done";
#                 the time is the host's clock when the line arrived (the
#                 guest's clock runs slow under emulation)
#   qmp.log       QEMU's own events (QMP), with QEMU's host timestamps: RESET
#                 is the machine really resetting
#   killed        the host time at which the test killed QEMU (a power cut)
# and, for the whole fleet, $VM_DIR/slots.raw: an `etcdctl watch` of the
# reboot slots, "HOST_TIME JSON", run in the namespace.
#
#   vm_setup_file             in setup_file(): check the inputs (below)
#   vm_init                   in setup(): sweep stale runs, make this run's
#                             directory, namespace and bridge
#   vm_etcd_start [N]         N (default 3) etcd members with TLS in the namespace
#   vm_etcdctl ARGS...        etcdctl against them, in the namespace
#   vm_add NAME [CONFIG]      a VM: overlay, tap, MAC; CONFIG is extra YAML for
#                             its config.d/20-test.yaml (e.g. "reboot_slot_ttl_sec: 60")
#   vm_start NAME...          boot NAME (QEMU and the host's readers)
#   vm_provision NAME...      wait for ssh, then install the .deb the way a user
#                             does (apt install ./clusterrebootd_*.deb), the
#                             configuration, TLS files, the health script and the
#                             ledger units, and enable the unit
#   vm_ssh NAME CMD           run CMD (a shell line) in NAME as root
#   vm_scp NAME FILE DEST     copy FILE to NAME:DEST
#   vm_state NAME             what its clusterrebootd reports to systemd (STATUS=)
#   vm_install_kernel NAME... start `dpkg -i` of the new kernel in NAME (in the
#                             background; its output in $VM_DIR/NAME/dpkg.log)
#   vm_wait_dpkg NAME SEC     wait for that dpkg to end; fails unless it exited 0
#   vm_hold_transaction NAME [late]  make the next kernel install stop after
#                             /run/reboot-required exists and before zz-update-grub
#                             (late: after it, the transaction still open)
#   vm_release_transaction NAME
#   vm_wait_ledger NAME WORD SEC [AFTER]  wait for NAME's ledger line WORD
#                             (up, down, held, ...) that arrived after host time AFTER
#   vm_wait_kernel SEC NAME...  wait until NAME is up on the new kernel
#   vm_kill NAME              SIGKILL its QEMU: a power cut; "killed" records when
#   vm_cut NAME / vm_heal NAME  drop / allow NAME's traffic to etcd (nft, in the namespace)
#   vm_ledger FILE            the fleet's ledger in scripts/e2e-ledger-check's format
#   vm_no_down_after LEDGER EXCEPT FROM [TO]   no other node went down after FROM
#   vm_lost_exactly LEDGER NODE   NODE, and only NODE, never came back
#   vm_resets NAME            QEMU's RESET events of NAME, host times, one a line
#   vm_resets_within NAME DOWN UP  QEMU reset NAME between DOWN and UP and at no other time
#   vm_slots FILE             the slot watch as "T put|delete NODE" lines
#   vm_assert_halted NODE     the rollout's halt names NODE (see its comment)
#   vm_diag                   print what explains a failure
#   vm_keep_logs DIR          copy the run's logs and records (not the disks) to DIR
#   vm_stop_all               end every VM and process of the run and remove it
#
# Inputs (environment, set by mk/e2e-vm.mk): VM_BASE (the base image), VM_KEY
# (its ssh key), VM_KERNEL_OLD and VM_KERNEL_NEW (uname -r before and after),
# VM_KERNEL_DEB (the new kernel's .deb), VM_DEB (clusterrebootd's .deb),
# ETCD_TEST_BIN, ETCDCTL_TEST_BIN.

VM_SUBNET=10.231.0
VM_HOST_IP=$VM_SUBNET.1
VM_BRIDGE=crdbr0
VM_MEM=${VM_MEM:-512}

vm_setup_file() {
	local v
	for v in VM_BASE VM_KEY VM_KERNEL_OLD VM_KERNEL_NEW VM_KERNEL_DEB VM_DEB ETCD_TEST_BIN ETCDCTL_TEST_BIN; do
		[[ -n "${!v:-}" ]] || {
			echo "e2e-vm: $v is not set: run through make e2e-vm (mk/e2e-vm.mk)" >&2
			return 1
		}
	done
	for v in "$VM_BASE" "$VM_KEY" "$VM_KERNEL_DEB" "$VM_DEB" "$ETCD_TEST_BIN" "$ETCDCTL_TEST_BIN"; do
		[[ -r "$v" ]] || {
			echo "e2e-vm: $v is missing" >&2
			return 1
		}
	done
	[[ $(id -u) == 0 ]] || {
		echo "e2e-vm: needs root (network namespaces, taps)" >&2
		return 1
	}
}

# vm_init: a run of its own. VM_RUN is the bats process's pid: it names the
# namespace and the directory, and scripts/vm-sweep removes both once that
# process is gone.
vm_init() {
	VM_RUNS=${VM_RUNS:-$REPO_ROOT/build/e2e-vm/runs}
	export VM_RUNS
	"$REPO_ROOT/scripts/vm-sweep"
	VM_RUN=$BASHPID
	VM_NS=crd-e2e-vm-$VM_RUN
	VM_DIR=$VM_RUNS/$VM_RUN
	VM_NODES=()
	VM_NEXT=1
	VM_PREFIX="/e2e-vm-$VM_RUN-$RANDOM/clusterrebootd"
	rm -rf "$VM_DIR"
	mkdir -p "$VM_DIR"
	ip netns add "$VM_NS"
	_vm_ns ip link set lo up
	_vm_ns ip link add "$VM_BRIDGE" type bridge
	_vm_ns ip addr add "$VM_HOST_IP/24" dev "$VM_BRIDGE"
	_vm_ns ip link set "$VM_BRIDGE" up
	export VM_RUN VM_NS VM_DIR VM_PREFIX
}

# _vm_ns CMD...: CMD inside the run's namespace.
_vm_ns() { ip netns exec "$VM_NS" "$@"; }

# _vm_bg LOG CMD...: CMD in the namespace, in a session of its own, in the
# background, its output appended to LOG.
_vm_bg() {
	local log=$1
	shift
	ip netns exec "$VM_NS" setsid "$@" </dev/null >>"$log" 2>&1 3>&- &
	disown "$!" 2>/dev/null || true
}

## etcd ######################################################################

# _vm_certs: a CA, a server certificate for the members' addresses and a
# client certificate the nodes and the health script use.
_vm_certs() {
	local d=$VM_DIR/tls
	mkdir -p "$d"
	(
		cd "$d" || exit 1
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
			-subj "/CN=crd-e2e-vm CA" -keyout ca-key.pem -out ca.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=etcd" \
			-keyout server-key.pem -out server.csr 2>/dev/null
		# .1 too: a member's connections to its peers leave from the
		# bridge's first address, and etcd checks a peer's certificate
		# against the address it connects from.
		printf 'subjectAltName=IP:%s.1,IP:%s.2,IP:%s.3,IP:%s.4,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' \
			"$VM_SUBNET" "$VM_SUBNET" "$VM_SUBNET" "$VM_SUBNET" >server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
			-extfile server.ext -out server.pem 2>/dev/null
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=clusterrebootd" \
			-keyout client-key.pem -out client.csr 2>/dev/null
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
			-extfile client.ext -out client.pem 2>/dev/null
		chmod 0600 ./*-key.pem
	)
}

# vm_etcd_start [N]: N members (default 3) on $VM_SUBNET.2-4, client and peer
# traffic over TLS with client certificates. Waits for a healthy cluster.
vm_etcd_start() {
	local n=${1:-3} i cluster="" eps=""
	_vm_certs
	for ((i = 1; i <= n; i++)); do
		_vm_ns ip addr add "$VM_SUBNET.$((i + 1))/24" dev "$VM_BRIDGE"
		cluster+="${cluster:+,}m$i=https://$VM_SUBNET.$((i + 1)):2380"
		eps+="${eps:+,}https://$VM_SUBNET.$((i + 1)):2379"
	done
	local t=$VM_DIR/tls
	for ((i = 1; i <= n; i++)); do
		local ip=$VM_SUBNET.$((i + 1))
		mkdir -p "$VM_DIR/etcd/m$i"
		_vm_bg "$VM_DIR/etcd/m$i.log" env -i "$ETCD_TEST_BIN" --name "m$i" --data-dir "$VM_DIR/etcd/m$i" \
			--listen-client-urls "https://$ip:2379" --advertise-client-urls "https://$ip:2379" \
			--listen-peer-urls "https://$ip:2380" --initial-advertise-peer-urls "https://$ip:2380" \
			--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "crd-e2e-vm-$VM_RUN" \
			--client-cert-auth --trusted-ca-file "$t/ca.pem" --cert-file "$t/server.pem" --key-file "$t/server-key.pem" \
			--peer-client-cert-auth --peer-trusted-ca-file "$t/ca.pem" --peer-cert-file "$t/server.pem" \
			--peer-key-file "$t/server-key.pem" --log-level warn
	done
	VM_ETCD_ENDPOINTS=$eps
	export VM_ETCD_ENDPOINTS
	local deadline=$((SECONDS + 60))
	until vm_etcdctl endpoint health >/dev/null 2>&1; do
		((SECONDS < deadline)) || {
			echo "vm_etcd_start: etcd not healthy after 60 s" >&2
			tail -n 5 "$VM_DIR"/etcd/m*.log >&2
			return 1
		}
		sleep 0.5
	done
	# The host's view of the reboot slots, outside every VM.
	_vm_bg "$VM_DIR/slots.watch.log" env -i bash -c \
		'"$0" --endpoints "$1" --cacert "$2/ca.pem" --cert "$2/client.pem" --key "$2/client-key.pem" watch --prefix "$3" -w json |
		while IFS= read -r l; do printf "%s %s\n" "$EPOCHREALTIME" "$l"; done >>"$4"' \
		"$ETCDCTL_TEST_BIN" "$VM_ETCD_ENDPOINTS" "$t" "$VM_PREFIX/rebooting/" "$VM_DIR/slots.raw"
}

vm_etcdctl() {
	local t=$VM_DIR/tls
	_vm_ns env -i "$ETCDCTL_TEST_BIN" --endpoints "$VM_ETCD_ENDPOINTS" --cacert "$t/ca.pem" --cert "$t/client.pem" \
		--key "$t/client-key.pem" --command-timeout 10s "$@"
}

## VMs #######################################################################

_vm_idx() { cat "$VM_DIR/$1/idx"; }
vm_ip() { echo "$VM_SUBNET.$((10 + $(_vm_idx "$1")))"; }

# vm_add NAME [CONFIG]: the VM's overlay of the base image, its tap on the
# bridge and its MAC (which gives it its address in the image).
vm_add() {
	local name=$1 cfg=${2:-} d=$VM_DIR/$1 i=$VM_NEXT
	((i <= 9)) || {
		echo "vm_add: at most 9 VMs" >&2
		return 1
	}
	VM_NEXT=$((VM_NEXT + 1))
	mkdir -p "$d"
	echo "$i" >"$d/idx"
	printf '%s\n' "$cfg" >"$d/config.yaml"
	qemu-img create -q -f qcow2 -F qcow2 -b "$VM_BASE" "$d/disk.qcow2"
	_vm_ns ip tuntap add dev "tap$i" mode tap
	_vm_ns ip link set "tap$i" master "$VM_BRIDGE"
	_vm_ns ip link set "tap$i" up
	VM_NODES+=("$name")
}

# vm_start NAME...: boot each VM, with its serial console in console.log, its
# ledger port read by the host (ledger.raw) and QEMU's events (qmp.log).
vm_start() {
	local name d i
	for name in "$@"; do
		d=$VM_DIR/$name
		i=$(_vm_idx "$name")
		rm -f "$d/ledger.sock" "$d/qmp.sock"
		_vm_ns nice -n 10 qemu-system-x86_64 -name "crd-e2e-vm-$VM_RUN-$name" \
			-accel tcg,tb-size=256 -m "$VM_MEM" -smp 1 -nographic -nodefaults \
			-drive "file=$d/disk.qcow2,if=virtio,format=qcow2,cache=unsafe" \
			-netdev "tap,id=n0,ifname=tap$i,script=no,downscript=no" \
			-device "virtio-net-pci,netdev=n0,mac=52:54:00:c7:d0:0$i" \
			-chardev "file,id=con,path=$d/console.log" -serial chardev:con \
			-chardev "socket,id=led,path=$d/ledger.sock,server=on,wait=off" -serial chardev:led \
			-qmp "unix:$d/qmp.sock,server=on,wait=off" \
			-pidfile "$d/qemu.pid" -daemonize
		# Each line is stamped when it arrives: nothing buffers it on the way.
		_vm_bg "$d/readers.log" bash -c \
			'socat -u UNIX-CONNECT:"$0",retry=100,interval=0.1 - |
			while IFS= read -r l; do printf "%s %s\n" "$EPOCHREALTIME" "${l%$'"'"'\r'"'"'}"; done >>"$1"' "$d/ledger.sock" "$d/ledger.raw"
		_vm_bg "$d/readers.log" bash -c \
			'{ printf "{\"execute\":\"qmp_capabilities\"}\n"; exec sleep 86400; } |
			socat - UNIX-CONNECT:"$0",retry=100,interval=0.1 >>"$1"' "$d/qmp.sock" "$d/qmp.log"
	done
}

_vm_ssh_opts() {
	printf '%s\n' -i "$VM_KEY" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
		-o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -o BatchMode=yes \
		-o ControlMaster=auto -o "ControlPath=$VM_DIR/ssh-%h" -o ControlPersist=300
}

# vm_ssh NAME CMD: CMD, a shell command line, as root in NAME.
vm_ssh() {
	local name=$1
	shift
	local opts
	mapfile -t opts < <(_vm_ssh_opts)
	_vm_ns ssh "${opts[@]}" "root@$(vm_ip "$name")" "$@"
}

vm_scp() {
	local opts
	mapfile -t opts < <(_vm_ssh_opts)
	_vm_ns scp -q "${opts[@]}" "$2" "root@$(vm_ip "$1"):$3"
}

vm_wait_ssh() {
	local name=$1 deadline=$((SECONDS + $2))
	until vm_ssh "$name" true 2>/dev/null; do
		((SECONDS < deadline)) || {
			echo "vm_wait_ssh: no ssh to $name within $2 s" >&2
			return 1
		}
		sleep 2
	done
}

# vm_provision NAME...: as an operator would: the package from its .deb with
# apt, the configuration as a drop-in, the etcd client certificate, the
# reference health script copied from the package's examples, the unit
# enabled and started. Then the test's own units (ledger). In parallel for
# all NAMEs.
vm_provision() {
	local name pids=() rc=0
	for name in "$@"; do
		_vm_provision_one "$name" >"$VM_DIR/$name/provision.log" 2>&1 &
		pids+=("$!")
	done
	local p
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	if ((rc != 0)); then
		for name in "$@"; do
			echo "--- provision $name" >&2
			tail -n 20 "$VM_DIR/$name/provision.log" >&2
		done
	fi
	return "$rc"
}

_vm_provision_one() {
	local name=$1 d=$VM_DIR/$1 deb
	vm_wait_ssh "$name" 600 || return 1
	deb=$(basename "$VM_DEB")
	vm_scp "$name" "$VM_DEB" "/root/$deb" || return 1
	vm_scp "$name" "$VM_KERNEL_DEB" /root/ || return 1
	vm_ssh "$name" "mkdir -p /etc/clusterrebootd/tls /usr/local/lib/crd-e2e /run/crd-e2e" || return 1
	vm_scp "$name" "$VM_DIR/tls/ca.pem" /etc/clusterrebootd/tls/ca.pem || return 1
	vm_scp "$name" "$VM_DIR/tls/client.pem" /etc/clusterrebootd/tls/client.pem || return 1
	vm_scp "$name" "$VM_DIR/tls/client-key.pem" /etc/clusterrebootd/tls/client-key.pem || return 1
	_vm_config "$name" >"$d/10-e2e.yaml"
	# A package dropped in with its deb, installed as a user would.
	vm_ssh "$name" "DEBIAN_FRONTEND=noninteractive apt-get install -y -q /root/$deb" || return 1
	vm_scp "$name" "$d/10-e2e.yaml" /etc/clusterrebootd/config.d/10-e2e.yaml || return 1
	vm_scp "$name" "$d/config.yaml" /etc/clusterrebootd/config.d/20-test.yaml || return 1
	vm_ssh "$name" "$(_vm_guest_setup)" || return 1
	vm_ssh "$name" "clusterrebootd validate-config --format text && systemctl enable --now clusterrebootd.service crd-e2e-down.service crd-e2e-up.service" || return 1
}

# _vm_config NAME: the node's drop-in. The package's defaults for the rest
# (reboot_command systemctl reboot, state_dir, run_dir). The detectors are
# Debian's own (auto: /var/run/reboot-required) and the running kernel
# against the installed ones. Times fit a machine under emulation, whose
# clock runs slow: reboots take minutes, not seconds, and a crd-lock child
# (a TLS handshake per etcd member) can take ten seconds and more to answer
# when the host is busy, so the health record's lease (3 x 15 s) and the
# dial timeout (20 s) leave room. The health script asks each etcd member in
# turn (curl, a TLS handshake each, up to HC_TIMEOUT 8 s): health_timeout_sec
# is 20 s per member (one healthy run for three members took 24 s in a VM at
# a host load of 22), and lock_ttl_sec 10 s more (it must outlive the
# under-lock health check): 20 and 30 for the smoke test's one member, 60
# and 70 for a fleet's three.
_vm_config() {
	local members
	members=$(awk -F, '{ print NF }' <<<"$VM_ETCD_ENDPOINTS")
	cat <<-EOF
		# make e2e-vm: node $1 against the test's etcd (TLS, client certificates).
		node_name: "$1"
		reboot_required_detectors:
		  - type: auto
		  - type: kernel
		health_script: /etc/clusterrebootd/health-check.sh
		health_timeout_sec: $((20 * members))
		health_publish_interval_sec: 15
		check_interval_sec: 5
		backoff_min_sec: 2
		backoff_max_sec: 10
		lock_key: "$VM_PREFIX/lock"
		lock_ttl_sec: $((20 * members + 10))
		etcd_endpoints: [$(echo "$VM_ETCD_ENDPOINTS" | sed 's/[^,]*/"&"/g; s/,/, /g')]
		etcd_tls:
		  enabled: true
		  ca_file: /etc/clusterrebootd/tls/ca.pem
		  cert_file: /etc/clusterrebootd/tls/client.pem
		  key_file: /etc/clusterrebootd/tls/client-key.pem
		etcd_dial_timeout_sec: 20
		reboot_slot_ttl_sec: 900
		settle_sec: 0
		max_reboots_per_day: 10
		windows:
		  timezone: "UTC"
	EOF
}

# _vm_guest_setup: the shell run in a VM after the package: the health
# script, the ledger units and the kernel hooks of the test.
_vm_guest_setup() {
	cat <<-'EOF'
		set -e
		# The reference health script, copied from the package as its header says,
		# checking etcd's quorum through its JSON gateway with the node's certificate.
		install -m 0755 /usr/share/doc/clusterrebootd/examples/health-check.sh /etc/clusterrebootd/health-check.sh
		cat >/etc/clusterrebootd/health-check.env <<-'ENV'
			HC_ETCD=curl
			HC_CURL_ARGS="--cacert /etc/clusterrebootd/tls/ca.pem --cert /etc/clusterrebootd/tls/client.pem --key /etc/clusterrebootd/tls/client-key.pem"
			HC_TIMEOUT=8
		ENV
		chmod 0600 /etc/clusterrebootd/tls/client-key.pem
		# The ledger: one line per event on the second serial port, read by the host.
		cat >/usr/local/lib/crd-e2e/ledger <<-'SH'
			#!/bin/sh
			# Test only (make e2e-vm): "EVENT BOOT_ID [KERNEL]" on ttyS1 for the host.
			boot=$(cat /proc/sys/kernel/random/boot_id)
			case $1 in
			up) echo "up $boot $(uname -r)" >/dev/ttyS1 ;;
			*) echo "$1 $boot" >/dev/ttyS1 ;;
			esac
		SH
		chmod 0755 /usr/local/lib/crd-e2e/ledger
		cat >/etc/systemd/system/crd-e2e-down.service <<-'UNIT'
			# Test only (make e2e-vm): "down" when the machine starts going down.
			[Unit]
			Description=clusterrebootd e2e-vm: ledger, down
			Before=clusterrebootd.service
			[Service]
			Type=oneshot
			RemainAfterExit=yes
			ExecStart=/bin/true
			ExecStop=/usr/local/lib/crd-e2e/ledger down
			[Install]
			WantedBy=multi-user.target
		UNIT
		cat >/etc/systemd/system/crd-e2e-up.service <<-'UNIT'
			# Test only (make e2e-vm): "up" once clusterrebootd is ready (READY=1).
			[Unit]
			Description=clusterrebootd e2e-vm: ledger, up
			Wants=clusterrebootd.service
			After=clusterrebootd.service
			[Service]
			Type=oneshot
			RemainAfterExit=yes
			ExecStart=/bin/sh -c 'systemctl is-active -q clusterrebootd.service && exec /usr/local/lib/crd-e2e/ledger up || exec /usr/local/lib/crd-e2e/ledger notready'
			[Install]
			WantedBy=multi-user.target
		UNIT
		# Kernel hooks of the test, around Debian's own: run-parts runs
		# initramfs-tools, unattended-upgrades (writes /run/reboot-required),
		# y-crd-e2e-hold, zz-update-grub, zzz-crd-e2e-done,
		# zzzz-crd-e2e-hold-late in this order.
		cat >/etc/kernel/postinst.d/y-crd-e2e-hold <<-'SH'
			#!/bin/sh
			# Test only (make e2e-vm): while /run/crd-e2e/hold exists, keep the
			# package transaction open here, after /run/reboot-required was written
			# and before zz-update-grub (at most 30 minutes).
			[ -e /run/crd-e2e/hold ] || exit 0
			/usr/local/lib/crd-e2e/ledger held
			i=0
			while [ -e /run/crd-e2e/hold ] && [ $i -lt 1800 ]; do sleep 1; i=$((i + 1)); done
			/usr/local/lib/crd-e2e/ledger released
		SH
		cat >/etc/kernel/postinst.d/zzz-crd-e2e-done <<-'SH'
			#!/bin/sh
			# Test only (make e2e-vm): the boot menu is written.
			/usr/local/lib/crd-e2e/ledger grub-done
		SH
		cat >/etc/kernel/postinst.d/zzzz-crd-e2e-hold-late <<-'SH'
			#!/bin/sh
			# Test only (make e2e-vm): while /run/crd-e2e/hold-late exists, keep the
			# package transaction open after the boot menu was written, so that it
			# ends within a second of its release (at most 30 minutes).
			[ -e /run/crd-e2e/hold-late ] || exit 0
			/usr/local/lib/crd-e2e/ledger held-late
			i=0
			while [ -e /run/crd-e2e/hold-late ] && [ $i -lt 1800 ]; do sleep 1; i=$((i + 1)); done
			/usr/local/lib/crd-e2e/ledger released-late
		SH
		chmod 0755 /etc/kernel/postinst.d/y-crd-e2e-hold /etc/kernel/postinst.d/zzz-crd-e2e-done \
			/etc/kernel/postinst.d/zzzz-crd-e2e-hold-late
		systemctl daemon-reload
	EOF
}

# vm_state NAME: the state NAME's clusterrebootd reports to systemd (STATUS=).
vm_state() { vm_ssh "$1" 'systemctl show -P StatusText clusterrebootd.service'; }

# vm_install_kernel NAME...: dpkg -i of the new kernel, in the background.
vm_install_kernel() {
	local name d
	for name in "$@"; do
		d=$VM_DIR/$name
		rm -f "$d/dpkg.rc"
		(
			rc=0
			vm_ssh "$name" "dpkg -i /root/$(basename "$VM_KERNEL_DEB")" >"$d/dpkg.log" 2>&1 || rc=$?
			echo "$rc" >"$d/dpkg.rc"
		) </dev/null >/dev/null 2>&1 3>&- &
		disown "$!" 2>/dev/null || true
	done
}

vm_wait_dpkg() {
	local name=$1 d=$VM_DIR/$1 deadline=$((SECONDS + $2))
	until [[ -e "$d/dpkg.rc" ]]; do
		((SECONDS < deadline)) || {
			echo "vm_wait_dpkg: dpkg -i in $name did not end within $2 s" >&2
			return 1
		}
		sleep 2
	done
	[[ "$(cat "$d/dpkg.rc")" == 0 ]] || {
		echo "vm_wait_dpkg: dpkg -i in $name exited $(cat "$d/dpkg.rc")" >&2
		tail -n 20 "$d/dpkg.log" >&2
		return 1
	}
}

# vm_hold_transaction NAME [late]: the next kernel install stops before
# zz-update-grub (its ledger says "held"), or with late after it
# ("held-late": the transaction still open, nothing slow left to do).
vm_hold_transaction() { vm_ssh "$1" "mkdir -p /run/crd-e2e && touch /run/crd-e2e/hold${2:+-$2}"; }
vm_release_transaction() { vm_ssh "$1" 'rm -f /run/crd-e2e/hold /run/crd-e2e/hold-late'; }

## The host's records ########################################################

# vm_events NAME: NAME's ledger port, "T EVENT ARG..." per line.
vm_events() { cat "$VM_DIR/$1/ledger.raw" 2>/dev/null; }

# vm_wait_ledger NAME WORD SEC [AFTER]: the host time of NAME's first ledger
# line WORD that arrived after AFTER (default 0).
vm_wait_ledger() {
	local name=$1 word=$2 deadline=$((SECONDS + $3)) after=${4:-0} t
	while :; do
		t=$(vm_events "$name" | awk -v w="$word" -v a="$after" '$2 == w && $1 > a && !f { print $1; f = 1 }')
		[[ -n "$t" ]] && {
			echo "$t"
			return 0
		}
		((SECONDS < deadline)) || {
			echo "vm_wait_ledger: no '$word' from $name within $3 s" >&2
			return 1
		}
		sleep 1
	done
}

# vm_kernel_up NAME: the kernel of NAME's last "up".
vm_kernel_up() { vm_events "$1" | awk '$2 == "up" { k = $4 } END { print k }'; }

# vm_wait_kernel SEC NAME...: wait until each NAME's last "up" is on the new
# kernel and its daemon has completed the reboot (no marker left).
vm_wait_kernel() {
	local sec=$1 deadline=$((SECONDS + $1)) name pending
	shift
	while :; do
		pending=()
		for name in "$@"; do
			if [[ "$(vm_kernel_up "$name")" != "$VM_KERNEL_NEW" ]] ||
				! vm_ssh "$name" 'test ! -e /var/lib/clusterrebootd/reboot-marker.json' 2>/dev/null; then
				pending+=("$name")
			fi
		done
		((${#pending[@]} == 0)) && return 0
		((SECONDS < deadline)) || {
			echo "vm_wait_kernel: ${pending[*]} not up on $VM_KERNEL_NEW with its reboot completed within $sec s" >&2
			return 1
		}
		sleep 5
	done
}

# vm_kill NAME: a power cut. "killed T" is the host time.
vm_kill() {
	local d=$VM_DIR/$1
	kill -KILL "$(cat "$d/qemu.pid")"
	echo "$EPOCHREALTIME" >"$d/killed"
}

# vm_cut NAME / vm_heal NAME: drop NAME's traffic to and from etcd's client
# port in the namespace (etcd and the bridge live there), silently: the
# connections stay open and nothing arrives, as in a partition.
vm_cut() {
	local ip
	ip=$(vm_ip "$1")
	_vm_ns nft list table inet crd_e2e >/dev/null 2>&1 || _vm_ns nft -f - <<-'EOF'
		table inet crd_e2e {
			chain input { type filter hook input priority 0; }
			chain output { type filter hook output priority 0; }
		}
	EOF
	_vm_ns nft add rule inet crd_e2e input ip saddr "$ip" tcp dport 2379 drop comment "\"cut $1\""
	_vm_ns nft add rule inet crd_e2e output ip daddr "$ip" tcp sport 2379 drop comment "\"cut $1\""
	echo "$EPOCHREALTIME" >>"$VM_DIR/$1/cut"
}

vm_heal() {
	local h
	for h in $(_vm_ns nft -a list table inet crd_e2e | awk -v c="\"cut $1\"" 'index($0, c) { print $NF }'); do
		_vm_ns nft delete rule inet crd_e2e input handle "$h" 2>/dev/null ||
			_vm_ns nft delete rule inet crd_e2e output handle "$h"
	done
	echo "$EPOCHREALTIME" >>"$VM_DIR/$1/healed"
}

# vm_ledger FILE: "NODE down T" / "NODE up T" / "NODE lost T" for the whole
# fleet, from what the host received: a "down" of the ledger port, or the
# kill of a running VM, opens a down interval; the next "up" (another boot)
# closes it; a killed VM is lost at its kill, one that has not come back by
# now at its "down" (scripts/e2e-ledger-check --slot-ttl then closes its
# interval when its slot has expired).
vm_ledger() {
	local out=$1 name
	: >"$out"
	for name in "${VM_NODES[@]}"; do
		{
			vm_events "$name"
			[[ -e "$VM_DIR/$name/killed" ]] && echo "$(cat "$VM_DIR/$name/killed") killed"
		} | sort -n | awk -v n="$name" '
			$2 == "down" && !down { print n, "down", $1; down = 1; at = $1; next }
			$2 == "up" && down { print n, "up", $1; down = 0; next }
			$2 == "killed" { if (!down) print n, "down", $1; print n, "lost", $1; down = 1; lost = 1 }
			END { if (down && !lost) print n, "lost", at }' >>"$out"
	done
}

# vm_resets_within NAME DOWN UP: QEMU reset NAME at least once between host
# times DOWN and UP, and never outside them: one reboot (the kernel's and the
# firmware's guest-reset events come milliseconds apart, one or two of them).
vm_resets_within() {
	local r
	r=$(vm_resets "$1")
	echo "$1: QEMU resets at ${r//$'\n'/ }; down $2, up $3"
	[[ -n "$r" ]] || {
		echo "vm_resets_within: QEMU never reset $1" >&2
		return 1
	}
	awk -v d="$2" -v u="$3" '{ if ($1 > d && $1 < u) in_++; else { print "vm_resets_within: a reset at " $1 " outside " d " .. " u; bad = 1 } }
		END { if (!in_) print "vm_resets_within: no reset between " d " and " u; exit bad || !in_ }' <<<"$r" >&2
}

# vm_no_down_after LEDGER EXCEPT FROM [TO]: no node but EXCEPT went down
# after host time FROM (and up to TO). Names the reboot that breaks it.
vm_no_down_after() {
	awk -v x="$2" -v f="$3" -v t="${4:-}" '
		$2 == "down" && $1 != x && $3 > f && (t == "" || $3 <= t) {
			printf "vm_no_down_after: %s went down at %s, after %s (%s was the one to be lost)\n", $1, $3, f, x; bad = 1
		}
		END { exit bad }' "$1" >&2
}

# vm_lost_exactly LEDGER NODE: exactly one node ends the ledger down (a
# "down" or a "lost" without a later "up"), and it is NODE.
vm_lost_exactly() {
	local lost
	lost=$(awk '{ last[$1] = $2 } END { for (n in last) if (last[n] != "up") print n }' "$1" | sort | tr '\n' ' ')
	[[ "$lost" == "${2:+$2 }" ]] || {
		echo "vm_lost_exactly: nodes that never came back: ${lost:-none}; want exactly $2" >&2
		return 1
	}
}

# vm_resets NAME: host times of QEMU's RESET events (a reset of the machine).
vm_resets() {
	grep '"event": *"RESET"' "$VM_DIR/$1/qmp.log" 2>/dev/null |
		jq -r '"\(.timestamp.seconds).\(.timestamp.microseconds | tostring | ("000000" + .)[-6:])"'
}

# vm_slots FILE: "T put NODE" / "T delete NODE" from the host's watch of the
# reboot slots (etcd's own record, read outside the VMs).
vm_slots() {
	awk '{ t = $1; sub(/^[^ ]+ /, ""); print t "\t" $0 }' "$VM_DIR/slots.raw" 2>/dev/null |
		while IFS=$'\t' read -r t json; do
			jq -r --arg t "$t" '.Events[]? | "\($t) \(if .type == 1 then "delete" else "put" end) \(.kv.key | @base64d | split("/") | last)"' <<<"$json"
		done >"$1"
}

# vm_assert_halted NODE: the rollout is halted after NODE's failure. The
# contract of the rollout's failure budget (issue 30, built on main at the
# same time as these tests): with rollout.max_failures 1 (the default) a
# reboot slot that ran out before its node came back is a failure, after
# which no slot is admitted anywhere, and `clusterrebootd status` carries
# .rollout.halted, null when not halted, else an object whose .failures
# lists {"node": NAME, "kind": KIND, ...}, KIND slot_expired for a node that
# never came back. This checks that, from a surviving VM (the first of the
# fleet that is not NODE): the first failure is NODE's, of kind
# slot_expired. On a branch without the failure budget there is no
# .rollout and this fails, as it should: the scenarios B and C that call it
# then fail here (or earlier, in their ledger, when another VM rebooted).
vm_assert_halted() {
	local node=$1 probe="" n status
	for n in "${VM_NODES[@]}"; do
		[[ "$n" != "$node" ]] && {
			probe=$n
			break
		}
	done
	status=$(vm_ssh "$probe" 'clusterrebootd status --format json' 2>/dev/null) || true
	echo "status from $probe: $(jq -c '.rollout // "no .rollout"' <<<"$status" 2>/dev/null || echo "$status")"
	jq -e --arg n "$node" '.rollout.halted.failures[0].node == $n and .rollout.halted.failures[0].kind == "slot_expired"' \
		<<<"$status" >/dev/null || {
		echo "vm_assert_halted: the rollout is not halted on $node's failure (slot_expired) as $probe sees it" >&2
		return 1
	}
}

## Failure output and clean-up ###############################################

vm_diag() {
	local name d
	[[ -n "${VM_DIR:-}" ]] || return 0
	for name in "${VM_NODES[@]}"; do
		d=$VM_DIR/$name
		echo "--- $name: ledger port (host time, event)"
		vm_events "$name"
		echo "--- $name: QEMU events"
		grep -o '"event": *"[A-Z_]*"' "$d/qmp.log" 2>/dev/null | sort | uniq -c
		echo "--- $name: console (last 15 lines)"
		tail -n 15 "$d/console.log" 2>/dev/null | tr -d '\r' | cut -c1-200
		echo "--- $name: clusterrebootd's journal (last 25 lines)"
		vm_ssh "$name" 'journalctl -u clusterrebootd -b -o cat --no-pager | tail -n 25 | cut -c1-400' 2>/dev/null
		[[ -s "$d/dpkg.log" ]] && {
			echo "--- $name: dpkg -i (last 8 lines)"
			tail -n 8 "$d/dpkg.log"
		}
	done
	echo "--- slots (host's etcd watch)"
	# Not to /dev/stdout: opening it truncates the file bats collects the
	# output in.
	vm_slots "$VM_DIR/slots.txt" 2>/dev/null && cat "$VM_DIR/slots.txt"
}

# vm_keep_logs DIR: copy the run's records (not the disks) to DIR.
vm_keep_logs() {
	[[ -n "${VM_DIR:-}" && -d "$VM_DIR" ]] || return 0
	mkdir -p "$1"
	(cd "$VM_DIR" && find . -type f \( -name '*.log' -o -name '*.raw' -o -name '*.yaml' -o -name killed -o -name cut -o -name healed \) \
		-exec cp --parents {} "$1" \;)
	echo "e2e-vm: the run's logs are in $1" >&2
}

# vm_stop_all: every process of the run (QEMU powers off at SIGKILL), the
# namespace with its bridge and taps, the run's directory.
vm_stop_all() {
	[[ -n "${VM_RUN:-}" ]] || return 0
	"$REPO_ROOT/scripts/vm-sweep" "$VM_DIR"
}
