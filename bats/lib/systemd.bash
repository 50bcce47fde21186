# shellcheck shell=bash
# systemd.bash: nodes that are systemd-nspawn containers booted from the cached
# Debian root with the built .deb installed, for bats/systemd/e2e_systemd.bats
# (make e2e-systemd, docs/e2e.md "Under real systemd"). Root only.
#
# Each container has a root of its own (a copy: its "disk"), its own PID, mount,
# UTS and IPC namespaces and the host's network namespace, so it reaches an etcd
# on the host's 127.0.0.1. A reboot inside it ends the container only: nspawn
# exits with 133 and the boot loop of the container starts it again.
#
#   sd_setup_file              in setup_file(): the base root with the .deb and
#                              the test units (below), $SD_BASE; needs $E2E_SD_DEB
#                              and $PKG_ROOT_TGZ
#   sd_init                    in setup(): $SD_DIR, a lock key of its own; needs
#                              $ETCD_ENDPOINTS
#   sd_node_add NAME           a container: copy of the base root, node_name NAME,
#                              the unit enabled; E2E_SYSTEMD_CONFIG (YAML), when
#                              set, becomes its config.d/20-override.yaml
#   sd_need_reboot NAME...     create NAME's detector file (a reboot is needed)
#   sd_start NAME...           start NAME's boot loop in the background
#   sd_exec NAME CMD...        run CMD inside NAME's running container (nsenter)
#   sd_wait_active NAME SEC    wait until clusterrebootd is active in NAME
#   sd_wait_completed SEC NAME...  wait until NAME has a reboot in its history and
#                              no reboot marker (its post-reboot checks passed)
#   sd_events NAME             NAME's container-side record (see below)
#   sd_exits NAME              NAME's nspawn exit statuses, one per line
#   sd_ledger FILE             write the ledger of every node to FILE
#                              (format of scripts/e2e-ledger-check)
#   sd_history NAME            NAME's state_dir/reboot-history.json
#   sd_diag                    print what explains a failure
#   sd_stop_all                power every container off and end every loop
#
# Installed into the base root for the test only:
#   crd-e2e-boot-id.service    copies the container's boot id to /run/crd-e2e/boot_id
#   clusterrebootd.service.d/e2e-boot-id.conf
#                              binds that file over /proc/sys/kernel/random/boot_id
#                              in the unit's namespace. Without it the daemon sees
#                              the HOST's boot id: ProtectKernelTunables= and
#                              ProtectControlGroups= give the service a fresh /proc,
#                              which loses nspawn's boot-id bind mount (systemd issue
#                              28059; nspawn keeps its backing file only since
#                              systemd PR 41333). The daemon would then never see
#                              its reboot happen (reboot_in_progress, then
#                              reboot_not_happened after reboot_slot_ttl_sec).
#   crd-e2e-ledger.service     ordered after clusterrebootd.service: appends
#                              "up T BOOT_ID" when the unit became active (its
#                              ActiveEnterTimestamp: READY=1 arrived) to
#                              /var/lib/clusterrebootd-test/events.
#   crd-e2e-down.service       ordered before clusterrebootd.service, so active
#                              however soon the daemon reboots: appends "down T
#                              BOOT_ID" when the machine goes down (stopped just
#                              after clusterrebootd).

SD_TEST_DIR=/var/lib/clusterrebootd-test
SD_DETECTOR=$SD_TEST_DIR/needs-reboot

# sd_setup_file: the base root every container is copied from.
sd_setup_file() {
	: "${E2E_SD_DEB:?run through make e2e-systemd (E2E_SD_DEB: the .deb to install)}"
	: "${PKG_ROOT_TGZ:?run through make e2e-systemd (PKG_ROOT_TGZ: the cached Debian root)}"
	[[ $(id -u) == 0 ]] || {
		echo "e2e-systemd: needs root (systemd-nspawn)" >&2
		return 1
	}
	command -v systemd-nspawn >/dev/null || {
		echo "e2e-systemd: systemd-nspawn missing (apt-get install systemd-container)" >&2
		return 1
	}
	SD_BASE="$BATS_FILE_TMPDIR/base"
	mkdir -p "$SD_BASE"
	tar -C "$SD_BASE" --numeric-owner -xzf "$PKG_ROOT_TGZ"
	cp "$E2E_SD_DEB" "$SD_BASE/tmp/pkg.deb"
	# dpkg's scripts need /proc; a private mount namespace keeps it from the host.
	# shellcheck disable=SC2016 # $0 is expanded by the inner sh
	unshare --mount --propagation private --fork \
		sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" dpkg -i /tmp/pkg.deb' "$SD_BASE" >/dev/null
	rm -f "$SD_BASE/tmp/pkg.deb"
	_sd_install_test_units "$SD_BASE"
	export SD_BASE
}

_sd_install_test_units() {
	local r=$1
	mkdir -p "$r$SD_TEST_DIR" "$r/var/log/journal" "$r/usr/local/sbin" \
		"$r/etc/systemd/system/clusterrebootd.service.d" "$r/etc/systemd/system/multi-user.target.wants"
	cat >"$r/etc/systemd/system/crd-e2e-boot-id.service" <<-'EOF'
		# Test only (make e2e-systemd): the container's boot id for clusterrebootd's namespace.
		[Unit]
		Description=clusterrebootd e2e: publish the container's boot id
		DefaultDependencies=no
		Before=clusterrebootd.service
		[Service]
		Type=oneshot
		RemainAfterExit=yes
		ExecStart=/bin/sh -c 'mkdir -p /run/crd-e2e && cat /proc/sys/kernel/random/boot_id >/run/crd-e2e/boot_id'
	EOF
	cat >"$r/etc/systemd/system/clusterrebootd.service.d/e2e-boot-id.conf" <<-'EOF'
		# Test only (make e2e-systemd): see bats/lib/systemd.bash.
		[Unit]
		Requires=crd-e2e-boot-id.service
		After=crd-e2e-boot-id.service
		[Service]
		BindReadOnlyPaths=/run/crd-e2e/boot_id:/proc/sys/kernel/random/boot_id
	EOF
	cat >"$r/usr/local/sbin/crd-e2e-ledger" <<-EOF
		#!/bin/sh
		# Test only (make e2e-systemd): record "up|down T BOOT_ID" in $SD_TEST_DIR/events.
		set -e
		boot=\$(cat /proc/sys/kernel/random/boot_id)
		case \$1 in
		up)
		    if [ "\$(systemctl is-active clusterrebootd.service)" != active ]; then
		        echo "notready \$(date +%s.%N) \$boot" >>$SD_TEST_DIR/events; exit 0
		    fi
		    ts=\$(systemctl show -P ActiveEnterTimestamp --timestamp=us+utc clusterrebootd.service)
		    t=\$(date -d "\$ts" +%s.%N) ;;
		down) t=\$(date +%s.%N) ;;
		esac
		echo "\$1 \$t \$boot" >>$SD_TEST_DIR/events
	EOF
	chmod 755 "$r/usr/local/sbin/crd-e2e-ledger"
	cat >"$r/etc/systemd/system/crd-e2e-ledger.service" <<-'EOF'
		# Test only (make e2e-systemd): when clusterrebootd became ready.
		[Unit]
		Description=clusterrebootd e2e: boot ledger, up
		Wants=clusterrebootd.service
		After=clusterrebootd.service
		[Service]
		Type=oneshot
		RemainAfterExit=yes
		ExecStart=/usr/local/sbin/crd-e2e-ledger up
		[Install]
		WantedBy=multi-user.target
	EOF
	# "down" comes from a unit started before clusterrebootd, so that it is
	# active (and its ExecStop runs) however soon after its start the daemon
	# reboots the machine: the "up" unit, ordered after clusterrebootd, may
	# not have started yet then, and a reboot would go unrecorded.
	cat >"$r/etc/systemd/system/crd-e2e-down.service" <<-'EOF'
		# Test only (make e2e-systemd): when the machine went down.
		[Unit]
		Description=clusterrebootd e2e: boot ledger, down
		Before=clusterrebootd.service
		[Service]
		Type=oneshot
		RemainAfterExit=yes
		ExecStart=/bin/true
		ExecStop=/usr/local/sbin/crd-e2e-ledger down
		[Install]
		WantedBy=multi-user.target
	EOF
	ln -sf /etc/systemd/system/crd-e2e-ledger.service "$r/etc/systemd/system/multi-user.target.wants/crd-e2e-ledger.service"
	ln -sf /etc/systemd/system/crd-e2e-down.service "$r/etc/systemd/system/multi-user.target.wants/crd-e2e-down.service"
	# What `systemctl enable clusterrebootd` does.
	ln -sf /lib/systemd/system/clusterrebootd.service "$r/etc/systemd/system/multi-user.target.wants/clusterrebootd.service"
}

# sd_init: per test. Containers live in $SD_DIR/NAME (root/, loop.log, nspawn.log).
sd_init() {
	: "${ETCD_ENDPOINTS:?sd_init: start etcd first (bats/lib/etcd.bash)}"
	SD_DIR="$BATS_TEST_TMPDIR/nodes"
	SD_LOCK_KEY="/e2e-systemd-$$-$RANDOM/clusterrebootd/lock"
	SD_NODES=()
	mkdir -p "$SD_DIR"
	export SD_DIR SD_LOCK_KEY
}

sd_root() { echo "$SD_DIR/$1/root"; }

# _sd_yaml_list "a,b": ["a", "b"]
_sd_yaml_list() {
	local IFS=, out="" x
	for x in $1; do out+="${out:+, }\"$x\""; done
	echo "[$out]"
}

# sd_node_add NAME: a container whose clusterrebootd is node NAME. Only the
# package's defaults for reboot_command, state_dir and run_dir: the reboot is
# `/usr/bin/systemctl reboot`.
sd_node_add() {
	local name=$1 r
	r="$(sd_root "$name")"
	mkdir -p "$SD_DIR/$name"
	cp -a --reflink=auto "$SD_BASE" "$r"
	echo "$name" >"$r/etc/hostname"
	cat >"$r/etc/clusterrebootd/config.d/10-e2e.yaml" <<-EOF
		# make e2e-systemd: node $name against the test's etcd on the host's loopback.
		node_name: "$name"
		reboot_required_detectors:
		  - type: file
		    path: "$SD_DETECTOR"
		health_script: /bin/true
		health_timeout_sec: 2
		health_publish_interval_sec: 1
		check_interval_sec: 1
		backoff_min_sec: 1
		backoff_max_sec: 2
		lock_key: "$SD_LOCK_KEY"
		lock_ttl_sec: 5
		etcd_endpoints: $(_sd_yaml_list "$ETCD_ENDPOINTS")
		etcd_dial_timeout_sec: 2
		reboot_slot_ttl_sec: 60
		settle_sec: 0
		max_reboots_per_day: 10
		windows:
		  timezone: "UTC"
	EOF
	if [[ -n "${E2E_SYSTEMD_CONFIG:-}" ]]; then
		printf '%s\n' "$E2E_SYSTEMD_CONFIG" >"$r/etc/clusterrebootd/config.d/20-override.yaml"
	fi
	SD_NODES+=("$name")
}

sd_need_reboot() {
	local n
	for n in "$@"; do touch "$(sd_root "$n")$SD_DETECTOR"; done
}

# _sd_own_cgroup NAME: move this shell into a cgroup of its own, below its
# current one, in the hierarchies a container's systemd manages (cgroup2 and a
# v1 name=systemd). Without a systemd on the host, nspawn --keep-unit puts the
# container into "payload" below its own cgroup: two containers started from
# one cgroup would share it, and each one's systemd would create, empty and
# remove the other's unit cgroups (seen: "Failed to attach to cgroup").
_sd_own_cgroup() {
	local name=$1 mnt fstype opts rel dir
	while read -r _ mnt fstype opts _; do
		case $fstype in
		cgroup2) rel=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup) ;;
		cgroup)
			[[ ",$opts," == *,name=systemd,* ]] || continue
			rel=$(awk -F: '$2 == "name=systemd" { print $3 }' /proc/self/cgroup)
			;;
		*) continue ;;
		esac
		dir="$mnt${rel%/}/crd-e2e-$name-$$"
		mkdir -p "$dir" || return 1
		echo "$dir" >>"$SD_DIR/$name/cgroups"
		echo "$BASHPID" >"$dir/cgroup.procs" || return 1
	done </proc/self/mounts
}

# _sd_boot_loop NAME: boot the container until it does not reboot (exit status
# other than 133) or a stop was asked for. After a reboot the detector file is
# removed before the next boot: the update that needed the reboot is active now.
_sd_boot_loop() {
	local name=$1 d="$SD_DIR/$1" r rc flags=(-b --register=no --console=pipe)
	r="$(sd_root "$name")"
	if [[ -d /run/systemd/system ]]; then
		: # systemd host: without --keep-unit nspawn runs each boot in a scope of its own
	else
		_sd_own_cgroup "$name" || return 1
		flags+=(--keep-unit)
	fi
	while [[ ! -e "$d/stop" ]]; do
		echo "boot $(date +%s.%N)" >>"$d/loop.log"
		systemd-nspawn -D "$r" -M "crd-e2e-$name" "${flags[@]}" </dev/null >>"$d/nspawn.log" 2>&1 &
		echo "$!" >"$d/nspawn.pid"
		rc=0
		wait "$!" || rc=$?
		echo "exit $rc $(date +%s.%N)" >>"$d/loop.log"
		((rc == 133)) || break
		rm -f "$r$SD_DETECTOR"
	done
	rm -f "$d/nspawn.pid"
	# The host side of nspawn's mount propagation; empty once the container is gone.
	rmdir "/run/systemd/nspawn/propagate/crd-e2e-$name" 2>/dev/null || true
}

sd_start() {
	local n
	for n in "$@"; do
		# Not fd 3 (bats' output channel), not a job bats waits for.
		_sd_boot_loop "$n" </dev/null >>"$SD_DIR/$n/loop.log" 2>&1 3>&- &
		echo "$!" >"$SD_DIR/$n/loop.pid"
		disown "$!"
	done
}

# sd_leader NAME: the PID (host view) of the container's init, checked to be a
# systemd in another mount and PID namespace than ours: sd_exec must never
# reach the host's systemd.
sd_leader() {
	local d="$SD_DIR/$1" nspawn pid
	nspawn=$(cat "$d/nspawn.pid" 2>/dev/null) || return 1
	for pid in $(pgrep -P "$nspawn" 2>/dev/null); do
		[[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == systemd ]] || continue
		[[ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]] || continue
		[[ "$(readlink "/proc/$pid/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]] || continue
		echo "$pid"
		return 0
	done
	return 1
}

# sd_exec NAME CMD...: CMD in every namespace of NAME's container.
sd_exec() {
	local leader
	leader=$(sd_leader "$1") || {
		echo "sd_exec: container $1 is not running" >&2
		return 1
	}
	shift
	nsenter --target "$leader" --all -- "$@"
}

# sd_show NAME PROPERTY: one property of clusterrebootd.service in NAME.
sd_show() { sd_exec "$1" systemctl show -P "$2" clusterrebootd.service; }

sd_wait_active() {
	local name=$1 deadline=$((SECONDS + $2))
	until [[ "$(sd_exec "$name" systemctl is-active clusterrebootd.service 2>/dev/null)" == active ]]; do
		if ((SECONDS >= deadline)); then
			echo "sd_wait_active: clusterrebootd in $name not active after $2 s" >&2
			return 1
		fi
		sleep 0.5
	done
}

sd_history() { cat "$(sd_root "$1")/var/lib/clusterrebootd/reboot-history.json" 2>/dev/null; }

# _sd_completed NAME: a reboot that happened is in the history and the marker
# is gone (it is removed when the post-reboot checks passed and the slot was freed).
_sd_completed() {
	local r
	r="$(sd_root "$1")"
	[[ ! -e "$r/var/lib/clusterrebootd/reboot-marker.json" ]] &&
		[[ "$(sd_history "$1" | jq '[.reboots[] | select(.rebooted)] | length' 2>/dev/null)" -ge 1 ]]
}

# sd_wait_completed SEC NAME...: wait for _sd_completed of each NAME. Fails at
# once when a reboot command returned without a reboot (the history says
# rebooted: false, the daemon logged reboot_not_happened).
sd_wait_completed() {
	local sec=$1 deadline=$((SECONDS + $1)) n pending
	shift
	while :; do
		pending=()
		for n in "$@"; do
			if [[ "$(sd_history "$n" | jq '[.reboots[] | select(.rebooted | not)] | length' 2>/dev/null)" -ge 1 ]]; then
				echo "sd_wait_completed: $n ran its reboot command but did not reboot (reboot_not_happened)" >&2
				return 1
			fi
			_sd_completed "$n" || pending+=("$n")
		done
		((${#pending[@]} == 0)) && return 0
		if ((SECONDS >= deadline)); then
			echo "sd_wait_completed: ${pending[*]} did not complete a reboot within $sec s" >&2
			return 1
		fi
		sleep 0.5
	done
}

sd_events() { cat "$(sd_root "$1")$SD_TEST_DIR/events" 2>/dev/null; }
sd_exits() { awk '$1 == "exit" { print $2 }' "$SD_DIR/$1/loop.log" 2>/dev/null; }

# sd_ledger FILE: "NAME down T" for every time a container went down and
# "NAME up T" for the first time its clusterrebootd was ready after that.
sd_ledger() {
	local out=$1 n
	: >"$out"
	for n in "${SD_NODES[@]}"; do
		sd_events "$n" | awk -v n="$n" '
			$1 == "down" { print n, "down", $2; down = 1 }
			$1 == "up" && down { print n, "up", $2; down = 0 }' >>"$out"
	done
}

sd_diag() {
	local n r
	for n in "${SD_NODES[@]}"; do
		r="$(sd_root "$n")"
		echo "--- $n: boot loop (nspawn exit statuses)"
		cat "$SD_DIR/$n/loop.log" 2>/dev/null
		echo "--- $n: container events"
		sd_events "$n"
		echo "--- $n: journalctl -D $r/var/log/journal (clusterrebootd, last 25 lines)"
		journalctl -D "$r/var/log/journal" -u clusterrebootd.service --no-pager -o short-precise 2>/dev/null |
			tail -n 25 | cut -c1-400
		echo "--- $n: end of nspawn's console output"
		tail -n 8 "$SD_DIR/$n/nspawn.log" 2>/dev/null
	done
}

# sd_stop_all: a stop file ends each boot loop; SIGTERM makes nspawn power the
# container off; whatever is left after 30 s is SIGKILLed (the container's init
# too, which ends its whole PID namespace).
sd_stop_all() {
	local n pid leader i dir
	[[ -n "${SD_DIR:-}" ]] || return 0
	for n in "${SD_NODES[@]}"; do
		touch "$SD_DIR/$n/stop"
		pid=$(cat "$SD_DIR/$n/nspawn.pid" 2>/dev/null) || continue
		kill -TERM "$pid" 2>/dev/null || true
	done
	for n in "${SD_NODES[@]}"; do
		pid=$(cat "$SD_DIR/$n/loop.pid" 2>/dev/null) || continue
		for ((i = 0; i < 300; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "sd_stop_all: $n did not power off within 30 s; killing it" >&2
			leader=$(sd_leader "$n") && kill -KILL "$leader" 2>/dev/null
			kill -KILL "$(cat "$SD_DIR/$n/nspawn.pid" 2>/dev/null)" 2>/dev/null
			kill -KILL "$pid" 2>/dev/null
			sleep 1
		fi
		# The cgroups of _sd_own_cgroup, empty now: deepest first.
		if [[ -f "$SD_DIR/$n/cgroups" ]]; then
			while read -r dir; do
				[[ "$dir" == */crd-e2e-"$n"-* ]] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
			done <"$SD_DIR/$n/cgroups"
		fi
	done
	return 0
}
