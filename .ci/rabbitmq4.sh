#!/usr/bin/env bash
# A RabbitMQ 4.3 node for CI, beside the machine's own broker (Debian 12's
# RabbitMQ 3.10), which it never touches.
#
#   .ci/rabbitmq4.sh install   Debian's testing suite (forky: RabbitMQ 4.3,
#                              Erlang/OTP 29) bootstrapped into a directory,
#                              with rabbitmq-server in it. Skipped when done.
#   .ci/rabbitmq4.sh start     starts the node (fresh data) and waits for it
#   .ci/rabbitmq4.sh stop      stops it and every process rooted in the
#                              directory, and unmounts what start mounted
#   .ci/rabbitmq4.sh env       prints the test environment for the node
#   .ci/rabbitmq4.sh ctl ARGS  rabbitmqctl of the directory, against the node
#
# The node listens on loopback only: AMQP on 127.0.0.1 and [::1] port
# $QUEUEY_CI_RABBITMQ4_PORT (5682), distribution on 127.0.0.1 port
# $QUEUEY_CI_RABBITMQ4_DIST_PORT (25682), and the management API on
# [::1]:15672. Code that derives the management API from the AMQP URL as
# http://HOST:15672 (the queuey tool, the hold census, tests) then finds
# this node's API through amqp://guest:guest@[::1]:5682/%2f, while the
# machine's broker keeps 127.0.0.1:15672 (its listener is IPv4 only).
#
# The node runs as upstream's RabbitMQ 4.3 does: Debian's package permits
# transient non-exclusive queues again, so the node's configuration denies
# them (deprecated_features.permit.transient_nonexcl_queues = false).
#
# Processes are only ever signalled by the pids this script recorded or by
# their root directory (the bootstrapped one): never by name, since the
# machine's broker is a beam.smp too, and never the machine's epmd, with
# which the node registers.
#
# Settings (environment):
#   QUEUEY_CI_RABBITMQ4_DIR        where the root lives, kept between runs
#                                  (/var/cache/queuey-ci/rabbitmq4; ~550 MB)
#   QUEUEY_CI_RABBITMQ4_SUITE      Debian suite (forky)
#   QUEUEY_CI_RABBITMQ4_VERSION    the RabbitMQ version it must give, as a
#                                  prefix (4.3)
#   QUEUEY_CI_DEBIAN_MIRROR        Debian archive (default: the machine's own,
#                                  from its apt sources)
#   QUEUEY_CI_RABBITMQ4_PORT, _DIST_PORT, _MGMT_PORT, _MGMT_IP, _NODENAME
set -euo pipefail

DIR=${QUEUEY_CI_RABBITMQ4_DIR:-/var/cache/queuey-ci/rabbitmq4}
SUITE=${QUEUEY_CI_RABBITMQ4_SUITE:-forky}
VERSION=${QUEUEY_CI_RABBITMQ4_VERSION:-4.3}
PORT=${QUEUEY_CI_RABBITMQ4_PORT:-5682}
DIST_PORT=${QUEUEY_CI_RABBITMQ4_DIST_PORT:-25682}
MGMT_PORT=${QUEUEY_CI_RABBITMQ4_MGMT_PORT:-15672}
MGMT_IP=${QUEUEY_CI_RABBITMQ4_MGMT_IP:-::1}
NODENAME=${QUEUEY_CI_RABBITMQ4_NODENAME:-queuey-ci-4@localhost}

ROOT=$DIR/root
# The node's own directory, inside the root (the server sees /var/lib/...).
NODE_DIR_IN_ROOT=/var/lib/queuey-ci-node
NODE_DIR=$ROOT$NODE_DIR_IN_ROOT
LAUNCHER_PID=$DIR/launcher.pid
CONSOLE=$DIR/console.log
# Written by debootstrap's successful end and by a finished install.
BOOTSTRAPPED=$DIR/bootstrapped
INSTALLED=$DIR/installed

say() { printf 'rabbitmq4: %s\n' "$*"; }
die() {
    printf 'rabbitmq4: %s\n' "$*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "run as root (it bootstraps a Debian root and chroots into it)"

bracket() { case $1 in *:*) printf '[%s]' "$1" ;; *) printf '%s' "$1" ;; esac }
MGMT_HOST=$(bracket "$MGMT_IP")
MGMT_URL=http://$MGMT_HOST:$MGMT_PORT

# Runs a command inside the root as its rabbitmq user, with a clean
# environment.
in_root() {
    chroot --userspec=rabbitmq:rabbitmq "$ROOT" /usr/bin/env -i \
        HOME=/var/lib/rabbitmq LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

is_mounted() { grep -qs " $1 " /proc/mounts; }
mounted_under_root() { grep -s " $ROOT/" /proc/mounts || true; }

port_open() { timeout 2 bash -c "</dev/tcp/$1/$2" 2>/dev/null; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# The pids of every process whose root directory is ROOT (what the node and
# the tests' nodes started inside it), but an epmd: one started in there
# serves other nodes too.
rooted_pids() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$ROOT" ] || continue
        [ "$(cat "$p/comm" 2>/dev/null)" = epmd ] && continue
        printf '%s\n' "${p#/proc/}"
    done
    return 0
}

disk() { say "disk: $(df -h "$1" | awk 'NR==2 {print $4 " free of " $2 " on " $6}')"; }

debian_mirror() {
    if [ -n "${QUEUEY_CI_DEBIAN_MIRROR:-}" ]; then
        printf '%s\n' "$QUEUEY_CI_DEBIAN_MIRROR"
        return
    fi
    # The first Debian archive (not its security archive) in the machine's
    # apt sources, deb822 or one-line style.
    { cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true; } |
        grep -oE '^(URIs:|deb)[[:space:]]+[^[:space:]]+' | awk '{print $2}' |
        grep -E '/debian/?$' | head -n 1
}

install() {
    mkdir -p "$DIR"
    exec 9>"$DIR/lock"
    flock 9
    if [ -f "$INSTALLED" ] && [ -x "$ROOT/usr/lib/rabbitmq/bin/rabbitmq-server" ]; then
        say "installed already in $ROOT: $(cat "$INSTALLED")"
        return
    fi
    disk "$DIR"
    if [ ! -f "$BOOTSTRAPPED" ]; then
        if [ -e "$ROOT" ]; then
            # A bootstrap that did not finish: start over, unless something
            # is mounted there (never delete through a mount).
            [ -z "$(mounted_under_root)" ] || die "$ROOT holds mounts; run stop first"
            say "removing the unfinished root $ROOT"
            rm -rf --one-file-system "$ROOT"
        fi
        if ! command -v debootstrap >/dev/null; then
            say "installing debootstrap"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
        fi
        local mirror script
        mirror=$(debian_mirror)
        [ -n "$mirror" ] || die "no Debian archive in the apt sources; set QUEUEY_CI_DEBIAN_MIRROR"
        # Debian 12's debootstrap has no script for the newer suites; sid's
        # bootstraps them.
        script=/usr/share/debootstrap/scripts/$SUITE
        [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
        say "debootstrap $SUITE from $mirror into $ROOT"
        debootstrap --variant=minbase "$SUITE" "$ROOT" "$mirror" "$script" >"$DIR/debootstrap.log" 2>&1 ||
            {
                tail -n 30 "$DIR/debootstrap.log" >&2
                die "debootstrap failed (log: $DIR/debootstrap.log)"
            }
        touch "$BOOTSTRAPPED"
    fi
    # No maintainer script may start a service inside the root: it would
    # take the machine's broker's port and node name.
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    # The archive may be a frozen snapshot, whose testing Release file is
    # past its Valid-Until date.
    echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99queuey-ci"
    grep -qs '^127\.0\.0\.1[[:space:]].*localhost' "$ROOT/etc/hosts" ||
        printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >>"$ROOT/etc/hosts"
    say "apt-get install rabbitmq-server in the root"
    # An install cut off in an earlier run is finished first.
    chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a
    chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends rabbitmq-server >"$DIR/apt.log" 2>&1 ||
        {
            tail -n 30 "$DIR/apt.log" >&2
            die "apt-get install failed (log: $DIR/apt.log)"
        }
    chroot "$ROOT" apt-get clean
    local installed
    # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
    installed=$(chroot "$ROOT" dpkg-query -W -f='${Package} ${Version}, ' rabbitmq-server erlang-base)
    # shellcheck disable=SC2016
    case $(chroot "$ROOT" dpkg-query -W -f='${Version}' rabbitmq-server) in
    "$VERSION"*) ;;
    *) die "$SUITE gave ${installed%, }, not RabbitMQ $VERSION" ;;
    esac
    printf '%s\n' "${installed%, }" >"$INSTALLED"
    say "installed ${installed%, } in $ROOT ($(du -sh --one-file-system "$ROOT" | cut -f1))"
    disk "$DIR"
}

mount_root() {
    is_mounted "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    is_mounted "$ROOT/sys" || mount -t sysfs -o ro sysfs "$ROOT/sys"
}

umount_root() {
    local m
    for m in "$ROOT/sys" "$ROOT/proc"; do
        if is_mounted "$m"; then umount "$m" || umount -l "$m"; fi
    done
}

start() {
    [ -f "$INSTALLED" ] || die "not installed in $DIR; run install first"
    if alive "$(cat "$LAUNCHER_PID" 2>/dev/null || true)"; then
        die "a node of $ROOT runs already (launcher $(cat "$LAUNCHER_PID")); run stop first"
    fi
    port_open 127.0.0.1 "$PORT" && die "port $PORT on 127.0.0.1 is taken"
    port_open 127.0.0.1 "$DIST_PORT" && die "port $DIST_PORT on 127.0.0.1 is taken"
    port_open "$MGMT_IP" "$MGMT_PORT" && die "port $MGMT_PORT on $MGMT_HOST is taken"

    # A fresh node every time: nothing left from an earlier run.
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR/mnesia" "$NODE_DIR/log"
    cat >"$NODE_DIR/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$PORT
listeners.tcp.local6 = ::1:$PORT
management.tcp.ip = $MGMT_IP
management.tcp.port = $MGMT_PORT
loopback_users = none
log.console = false
log.file.level = info
deprecated_features.permit.transient_nonexcl_queues = false
EOF
    echo '[rabbitmq_management].' >"$NODE_DIR/enabled_plugins"
    chroot "$ROOT" chown -R rabbitmq:rabbitmq "$NODE_DIR_IN_ROOT" /var/lib/rabbitmq

    mount_root
    local d=$NODE_DIR_IN_ROOT
    setsid chroot --userspec=rabbitmq:rabbitmq "$ROOT" /usr/bin/env -i \
        HOME=/var/lib/rabbitmq LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        ERL_EPMD_ADDRESS=127.0.0.1 \
        RABBITMQ_NODENAME="$NODENAME" \
        RABBITMQ_DIST_PORT="$DIST_PORT" \
        RABBITMQ_MNESIA_BASE="$d/mnesia" \
        RABBITMQ_LOG_BASE="$d/log" \
        RABBITMQ_PID_FILE="$d/pid" \
        RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
        /usr/lib/rabbitmq/bin/rabbitmq-server >"$CONSOLE" 2>&1 </dev/null &
    echo $! >"$LAUNCHER_PID"

    local started=$SECONDS
    until in_root rabbitmqctl -q -n "$NODENAME" await_startup --timeout 10 >/dev/null 2>&1 &&
        port_open 127.0.0.1 "$PORT" && port_open ::1 "$PORT" && port_open "$MGMT_IP" "$MGMT_PORT"; do
        if ! alive "$(cat "$LAUNCHER_PID")"; then
            tail -n 30 "$CONSOLE" >&2
            die "the node exited while starting (console: $CONSOLE, logs: $NODE_DIR/log)"
        fi
        [ $((SECONDS - started)) -lt 180 ] || die "the node did not start within 180 s (console: $CONSOLE)"
        sleep 1
    done
    # The API found at the derived address must be this node's, not the
    # machine's broker's.
    local overview version
    overview=$(curl -sf -u guest:guest "$MGMT_URL/api/overview") ||
        die "the management API does not answer on $MGMT_URL"
    version=$(printf '%s' "$overview" | sed -n 's/.*"rabbitmq_version":"\([^"]*\)".*/\1/p')
    printf '%s' "$overview" | grep -qF "\"node\":\"$NODENAME\"" ||
        die "$MGMT_URL is not the API of $NODENAME"
    case $version in
    "$VERSION"*) ;;
    *) die "$MGMT_URL reports RabbitMQ '$version', not $VERSION" ;;
    esac
    say "RabbitMQ $version up as $NODENAME in $((SECONDS - started)) s (beam pid $(cat "$NODE_DIR/pid"))"
    say "  AMQP amqp://guest:guest@[::1]:$PORT/%2f (and 127.0.0.1:$PORT), management $MGMT_URL"
}

stop() {
    local beam launcher
    beam=$(cat "$NODE_DIR/pid" 2>/dev/null || true)
    launcher=$(cat "$LAUNCHER_PID" 2>/dev/null || true)
    if alive "$beam" || alive "$launcher"; then
        timeout 60 chroot --userspec=rabbitmq:rabbitmq "$ROOT" /usr/bin/env -i \
            HOME=/var/lib/rabbitmq LANG=C.UTF-8 PATH=/usr/lib/rabbitmq/bin:/usr/bin:/bin \
            rabbitmqctl -q -n "$NODENAME" stop >/dev/null 2>&1 || true
        for _ in $(seq 30); do
            alive "$beam" || alive "$launcher" || break
            sleep 1
        done
        for p in "$beam" "$launcher"; do
            if alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
        done
    fi
    # Whatever still runs inside the root: the node's helpers, a stuck CLI,
    # a test's private node left behind.
    local p left=0
    for p in $(rooted_pids); do
        kill -KILL "$p" 2>/dev/null && left=$((left + 1))
    done
    [ "$left" = 0 ] || say "killed $left leftover process(es) rooted in $ROOT"
    for _ in $(seq 20); do
        [ -z "$(rooted_pids)" ] && break
        sleep 0.5
    done
    rm -f "$LAUNCHER_PID"
    [ -d "$ROOT" ] && umount_root
    if [ -n "$(mounted_under_root)" ]; then
        mounted_under_root >&2
        die "still mounted under $ROOT"
    fi
    say "stopped; nothing of it runs or is mounted"
}

print_env() {
    cat <<EOF
export AMQP_URL='amqp://guest:guest@[::1]:$PORT/%2f'
export QUEUEY_TEST_RABBITMQ_ROOT='$ROOT'
export QUEUEY_TEST_RABBITMQ_NODE='$NODENAME'
export PATH='$(cd "$(dirname "$0")" && pwd)/rabbitmq4-bin':"\$PATH"
EOF
}

case ${1:-} in
install) install ;;
start) start ;;
stop) stop ;;
env) print_env ;;
ctl)
    shift
    in_root rabbitmqctl -n "$NODENAME" "$@"
    ;;
*)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
