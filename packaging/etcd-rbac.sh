#!/bin/sh
# etcd-rbac.sh: least-privilege etcd roles and users for clusterrebootd, one
# per node (docs/security.md, "Per-node etcd roles").
#
# Synopsis
#   etcd-rbac.sh [--namespace NS] [--lock-key KEY] [--operator USER]
#                [--fleetlock USER] [--user-prefix P] [--auth password|cert]
#                [--secrets DIR] [--group GROUP]... [--wave W]...
#                [--replace] [--print]
#                NODE...
#
# Description
#   For every NODE it creates the role clusterrebootd-node-NODE and the user
#   P NODE (P is --user-prefix, default "crd-node-"), granted that role. The
#   role reads the whole namespace and writes only the keys the node's own
#   steps write (docs/security.md lists them); the lock's entries and the
#   once-per-cluster notification keys are shared by every node. --operator
#   adds the role clusterrebootd-operator (read and write on the whole
#   namespace: pause, holds, reboot requests, resume, evictions) and its user;
#   --fleetlock the role clusterrebootd-fleetlock for `crd-lock serve
#   fleetlock`, which writes slots and rollout records for any client id.
#
#   etcdctl (ETCDCTL, default etcdctl) talks to etcd as configured by its own
#   environment: ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY
#   and ETCDCTL_USER=root:PASSWORD (or a root client certificate) once auth
#   is enabled. The script never enables auth itself (see docs/security.md).
#   ETCDCTL_COMMAND_TIMEOUT defaults to 30s (etcdctl's own is 5 s).
#
#   --auth password (the default) gives every user a random password, kept in
#   --secrets DIR/USER (mode 0600; an existing file is reused, so a second run
#   keeps the passwords): copy it to the node as etcd_password_file. Passwords
#   go to etcdctl on stdin, never on its command line. --auth cert creates the
#   users without a password: etcd takes the user from the client
#   certificate's CN (etcd --client-cert-auth), so each node's certificate
#   must carry CN=P NODE.
#
#   --group GROUP (repeatable) lets each NODE also write its key in GROUP's
#   part of the index (<ns>index/group/GROUP/NODE): name every group these
#   nodes are configured with, or may move to. The key of no group is always
#   granted. A node whose role lacks its group's key still publishes, and
#   logs a warning once an hour; admissions with a percentage budget then
#   read every health record (docs/security.md).
#
#   --wave W (repeatable, 0 to 99) lets each NODE also write its key in wave
#   W's part of the index (<ns>index/busy/WW/NODE, written with the health
#   record while the node needs or is in its reboot): name every wave these
#   nodes are configured with, or may move to. Wave 0's is always granted. A
#   node whose role lacks its wave's key cannot publish while it needs a
#   reboot (exit 7, naming the key), so it is not rebooted.
#
#   An existing role or user is an error, unless --replace: then the role is
#   deleted and created again with exactly the permissions below (its users
#   lose it for the moment in between; a request a node makes then is refused
#   once and succeeds at its next cycle), and an existing user keeps its
#   password and is granted the role again.
#
#   --print writes the etcdctl commands instead of running them (no etcd is
#   contacted; passwords appear as "$(cat FILE)" and are not generated).
#
# Exit status
#   0 done; 1 an etcdctl command failed or a role or user exists (the error
#   names it); 2 usage.
#
# Example
#   ETCDCTL_ENDPOINTS=https://etcd-1:2379 ETCDCTL_CACERT=ca.pem \
#   ETCDCTL_USER=root:"$(cat root.pw)" \
#     packaging/etcd-rbac.sh --operator crd-operator node-1 node-2 node-3
set -eu
# Keys are words: no globbing of the permissions' words.
set -f

ns=/cluster/clusterrebootd/
lock_key=
operators=
fleetlocks=
groups=
waves=
user_prefix=crd-node-
auth=password
secrets=./etcd-rbac-secrets
replace=
print=
ETCDCTL=${ETCDCTL:-etcdctl}
# A busy etcd (a fleet publishing, a compaction) may take longer than
# etcdctl's 5 s default for one role change; the caller's value wins.
ETCDCTL_COMMAND_TIMEOUT=${ETCDCTL_COMMAND_TIMEOUT:-30s}
export ETCDCTL_COMMAND_TIMEOUT

usage() {
	sed -n '/^# Synopsis/,/^# Description/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

die() {
	echo "etcd-rbac.sh: $*" >&2
	exit 1
}

need() {
	[ $# -ge 2 ] || { echo "etcd-rbac.sh: $1 needs a value" >&2; usage; }
}

while [ $# -gt 0 ]; do
	case $1 in
	--namespace) need "$@"; ns=$2; shift 2 ;;
	--lock-key) need "$@"; lock_key=$2; shift 2 ;;
	--operator) need "$@"; operators="$operators $2"; shift 2 ;;
	--fleetlock) need "$@"; fleetlocks="$fleetlocks $2"; shift 2 ;;
	--user-prefix) need "$@"; user_prefix=$2; shift 2 ;;
	--auth) need "$@"; auth=$2; shift 2 ;;
	--secrets) need "$@"; secrets=$2; shift 2 ;;
	--group) need "$@"; groups="$groups $2"; shift 2 ;;
	--wave) need "$@"; waves="$waves $2"; shift 2 ;;
	--replace) replace=1; shift ;;
	--print) print=1; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) echo "etcd-rbac.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done

# The rules of clusterrebootd validate-config (lib/config), and no white
# space: the permissions below are words.
case $ns in
*[[:space:]]*) echo "etcd-rbac.sh: --namespace $ns must contain no spaces" >&2; exit 2 ;;
/*/) ;;
*) echo "etcd-rbac.sh: --namespace $ns must start and end with '/', e.g. /prod/clusterrebootd/" >&2; exit 2 ;;
esac
[ -n "$lock_key" ] || lock_key=${ns}lock
case $lock_key in
*/ | *[[:space:]]*) echo "etcd-rbac.sh: --lock-key $lock_key must not end with '/' or contain spaces" >&2; exit 2 ;;
"$ns"*) ;;
*) echo "etcd-rbac.sh: --lock-key $lock_key is outside --namespace $ns (clusterrebootd refuses that too)" >&2; exit 2 ;;
esac
# A lock_key beside the protocol's directories: every node may write under
# <lock_key>/, so a lock_key that shares a directory with the slots, records
# or the rollout's keys would let every node write every node's.
for d in rebooting/ nodes/ disable/ holds/ requests/ rollout/ queue/ notified/ index/ fleetlock/ rules/; do
	case $lock_key/ in "$ns$d"*) collide=1 ;; esac
	case $ns$d in "$lock_key/"*) collide=1 ;; esac
	[ -z "${collide:-}" ] || { echo "etcd-rbac.sh: --lock-key $lock_key collides with $ns$d; choose one beside it, e.g. ${ns}lock" >&2; exit 2; }
done
case $auth in
password | cert) ;;
*) echo "etcd-rbac.sh: --auth $auth: use password or cert" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || [ -n "$operators$fleetlocks" ] || { echo "etcd-rbac.sh: name at least one node (or --operator, --fleetlock)" >&2; usage; }

valid_name() { # a node_name: 1 to 253 letters, digits, '.', '_', '-', starting with a letter or digit
	case $1 in
	'' | [!A-Za-z0-9]* | *[!A-Za-z0-9._-]*) return 1 ;;
	esac
	[ ${#1} -le 253 ]
}
for node in "$@"; do
	valid_name "$node" || { echo "etcd-rbac.sh: $node is not a node_name (letters, digits, '.', '_', '-', starting with a letter or digit)" >&2; exit 2; }
	valid_name "$user_prefix$node" || { echo "etcd-rbac.sh: --user-prefix $user_prefix: use letters, digits, '.', '_', '-'" >&2; exit 2; }
done
for group in $groups; do # lib/config ValidGroup
	case $group in
	*[!A-Za-z0-9._-]*) echo "etcd-rbac.sh: --group $group: use letters, digits, '.', '_', '-' (at most 63)" >&2; exit 2 ;;
	esac
	[ ${#group} -le 63 ] || { echo "etcd-rbac.sh: --group $group: at most 63 characters" >&2; exit 2; }
done
for wave in $waves; do # lib/config: rollout.wave
	case $wave in
	[0-9] | [1-9][0-9]) ;;
	*) echo "etcd-rbac.sh: --wave $wave: use a wave from 0 to 99" >&2; exit 2 ;;
	esac
done
for user in $operators $fleetlocks; do
	valid_name "$user" || { echo "etcd-rbac.sh: user $user: use letters, digits, '.', '_', '-'" >&2; exit 2; }
done

quote() { # one shell word, quoted only where it needs to be
	case $1 in
	'' | *[!A-Za-z0-9_./:=,+-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
	*) printf '%s' "$1" ;;
	esac
}

# run ARGS...: etcdctl ARGS, or print it.
run() {
	if [ -n "$print" ]; then
		line=$ETCDCTL
		for a in "$@"; do line="$line $(quote "$a")"; done
		echo "$line"
		return
	fi
	out=$("$ETCDCTL" "$@" 2>&1) || die "etcdctl $*: $out"
}

exists() { # exists role|user NAME
	[ -z "$print" ] && "$ETCDCTL" "$1" get "$2" >/dev/null 2>&1
}

# role NAME PERM...: create the role with the permissions, each
# "read|readwrite key|prefix KEY".
role() {
	name=$1
	shift
	if exists role "$name"; then
		[ -n "$replace" ] || die "role $name exists: rerun with --replace to create it again with exactly these permissions"
		run role delete "$name"
	fi
	run role add "$name"
	while [ $# -gt 0 ]; do
		case $2 in
		prefix) run role grant-permission "$name" --prefix=true "$1" "$3" ;;
		key) run role grant-permission "$name" "$1" "$3" ;;
		esac
		shift 3
	done
}

# user NAME ROLE: create the user (unless it exists and --replace) and grant it ROLE.
user() {
	name=$1
	if exists user "$name"; then
		[ -n "$replace" ] || die "user $name exists: rerun with --replace to grant it its role again (its password is kept)"
	elif [ "$auth" = cert ]; then
		run user add "$name" --no-password
	elif [ -n "$print" ]; then
		echo "cat $(quote "$secrets/$name") | $ETCDCTL user add $(quote "$name") --interactive=false"
	else
		file=$secrets/$name
		if [ ! -s "$file" ]; then
			(umask 077 && mkdir -p "$secrets")
			pw=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
			(umask 077 && printf '%s\n' "$pw" >"$file")
		fi
		chmod 0600 "$file"
		out=$("$ETCDCTL" user add "$name" --interactive=false <"$file" 2>&1) || die "etcdctl user add $name: $out"
	fi
	run user grant-role "$name" "$2"
}

# What every node's steps write (docs/security.md has the table and why):
# its own keys, exact or with a trailing '/' so that node1 is not node10.
node_perms() {
	n=$1
	echo "read prefix $ns"
	echo "readwrite key ${ns}nodes/$n"
	echo "readwrite key ${ns}index/member/$n"
	echo "readwrite key ${ns}index/down/$n"
	echo "readwrite key ${ns}index/group//$n"
	for g in $groups; do
		echo "readwrite key ${ns}index/group/$g/$n"
	done
	echo "readwrite key ${ns}index/busy/00/$n"
	seen=" 0 "
	for w in $waves; do
		case $seen in *" $w "*) continue ;; esac
		seen="$seen$w "
		printf 'readwrite key %sindex/busy/%02d/%s\n' "$ns" "$w" "$n"
	done
	echo "readwrite key ${ns}rules/$n"
	echo "readwrite key ${ns}index/rules-changed"
	echo "readwrite key ${ns}index/counts"
	echo "readwrite key ${ns}rebooting/$n"
	echo "readwrite key ${ns}requests/$n"
	echo "readwrite key ${ns}queue/$n"
	echo "readwrite key ${ns}rollout/inflight/$n"
	echo "readwrite prefix ${ns}rollout/failures/$n/"
	echo "readwrite key ${ns}rollout/paced/$n"
	echo "readwrite prefix ${ns}rollout/starts/$n/"
	echo "readwrite key ${ns}rollout/wavedone/$n"
	echo "readwrite key ${ns}rollout/done/$n"
	echo "readwrite prefix ${ns}rollout/halts/$n/"
	echo "readwrite prefix ${ns}notified/"
	echo "readwrite prefix $lock_key/"
}

fleetlock_perms() {
	echo "read prefix $ns"
	for d in rebooting/ queue/ rollout/inflight/ rollout/failures/ rollout/paced/ rollout/starts/ rollout/wavedone/ rollout/done/ rollout/halts/ notified/ fleetlock/; do
		echo "readwrite prefix $ns$d"
	done
	echo "readwrite prefix $lock_key/"
}

# Nothing is changed when a role or user exists (without --replace): each
# is checked before the first is created.
if [ -z "$replace" ]; then
	for node in "$@"; do
		! exists role "clusterrebootd-node-$node" || die "role clusterrebootd-node-$node exists: rerun with --replace to create it again with exactly these permissions"
		! exists user "$user_prefix$node" || die "user $user_prefix$node exists: rerun with --replace to grant it its role again (its password is kept)"
	done
	[ -z "$operators" ] || ! exists role clusterrebootd-operator || die "role clusterrebootd-operator exists: rerun with --replace"
	[ -z "$fleetlocks" ] || ! exists role clusterrebootd-fleetlock || die "role clusterrebootd-fleetlock exists: rerun with --replace"
	for u in $operators $fleetlocks; do
		! exists user "$u" || die "user $u exists: rerun with --replace to grant it its role again (its password is kept)"
	done
fi

[ -z "$print" ] || echo "# clusterrebootd etcd roles for namespace $ns, lock_key $lock_key (packaging/etcd-rbac.sh)"
for node in "$@"; do
	# shellcheck disable=SC2046 # the permissions are words without spaces
	role "clusterrebootd-node-$node" $(node_perms "$node")
	user "$user_prefix$node" "clusterrebootd-node-$node"
done
if [ -n "$operators" ]; then
	role clusterrebootd-operator readwrite prefix "$ns"
	for u in $operators; do user "$u" clusterrebootd-operator; done
fi
if [ -n "$fleetlocks" ]; then
	# shellcheck disable=SC2046
	role clusterrebootd-fleetlock $(fleetlock_perms)
	for u in $fleetlocks; do user "$u" clusterrebootd-fleetlock; done
fi
if [ -z "$print" ]; then
	for node in "$@"; do echo "node $node: user $user_prefix$node, role clusterrebootd-node-$node"; done
	for u in $operators; do echo "operator: user $u, role clusterrebootd-operator"; done
	for u in $fleetlocks; do echo "fleetlock: user $u, role clusterrebootd-fleetlock"; done
	[ "$auth" = cert ] || echo "passwords: $secrets/USER (mode 0600): copy each to its node as etcd_password_file"
fi
