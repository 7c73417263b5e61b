# shellcheck shell=bash
# scripts/devcluster/tree.bash: the Debian trixie tree that runs the Slurm 24.11 cluster
# "local24". Sourced by scripts/dev-cluster (which defines log, die, STATE...); not run alone.
#
# The tree is software only, one per machine, shared by every state dir: it is built once by
# debootstrap from the Debian mirror of this machine's apt sources, and reused while present.
# Everything that changes (configs, keys, databases, pidfiles, sockets, logs, run folders) lives
# in the state dir, which every in-tree process sees at the SAME path (a bind mount), so tests
# read run folders and pidfiles at identical paths on the host.
#
# No mount is made in the host's mount namespace: each in-tree daemon is started by
# `unshare --mount` into a private namespace of its own that mounts proc, /dev, /sys and the
# state dir, then chroots. Those mounts exist only as long as a process of that namespace
# lives, so `down` (which stops the daemons by pid) leaves nothing mounted, and a `down` run
# from another namespace (`ip netns exec`) has nothing it could fail to see.

readonly TREE="${REMOTE_CHAIN_TREE:-/var/cache/remote-chain/trixie-slurm}"
readonly TREE_SUITE=trixie
readonly TREE_PACKAGES=(slurm-wlm slurmdbd slurm-client munge mariadb-server openssh-server
    tcsh zsh procps python3 ca-certificates)
# Inside the tree the Slurm client commands are diverted (dpkg-divert --rename) out of /usr/bin
# into this folder, which nothing puts on PATH but the users' own rc files: a site's
# `module load slurm`. Daemons stay in /usr/sbin.
readonly TREE_SLURM_BIN=/opt/slurm/bin
# Marks a complete tree; a build that died leaves $TREE.partial, never a half $TREE.
readonly TREE_DONE=.remote-chain-tree

# The Debian mirror that the host's apt sources already use (deb822 or one-line format).
debian_mirror() {
    if [[ -n ${REMOTE_CHAIN_DEBIAN_MIRROR:-} ]]; then
        printf '%s\n' "$REMOTE_CHAIN_DEBIAN_MIRROR"
        return 0
    fi
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -oE '(^deb |^URIs:)[[:space:]]*(\[[^]]*\][[:space:]]*)?[a-z]+://[^[:space:]]+/debian/?([[:space:]]|$)' |
        grep -oE '[a-z]+://[^[:space:]]+' | head -n 1) || true
    [[ -n $uri ]] || die "no Debian mirror (a URI ending in /debian) in /etc/apt/sources*; set REMOTE_CHAIN_DEBIAN_MIRROR"
    printf '%s\n' "${uri%/}"
}

# The argv prefix that runs a command chrooted in the tree, in a private mount namespace with
# proc, /dev, /sys and the state dir mounted (see the header). The command's environment is
# ours, so REMOTE_CHAIN_DEV_DIR marks every daemon as this state dir's.
tree_argv() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    local script='set -e; t=$1; s=$2; shift 2
mount -t proc proc "$t/proc"
mount --rbind /dev "$t/dev"
mount --rbind /sys "$t/sys"
mkdir -p "$t$s"
mount --bind "$s" "$t$s"
exec chroot "$t" "$@"'
    TREE_ARGV=(unshare --mount --propagation private -- bash -c "$script" tree "$TREE" "$STATE")
}

# tree_run COMMAND...: run a command in the tree (PATH with the diverted Slurm commands).
tree_run() {
    local TREE_ARGV
    tree_argv
    "${TREE_ARGV[@]}" env PATH="$TREE_SLURM_BIN:/usr/sbin:/usr/bin:/sbin:/bin" "$@"
}

# Build the tree when it is absent (minutes; once per machine). Serialised by a lock beside it.
ensure_tree() {
    [[ -e $TREE/$TREE_DONE ]] && return 0
    mkdir -p "$(dirname "$TREE")"
    install -d -m 755 "$STATE" "$LOG"
    local lock
    exec {lock}>"$TREE.lock"
    flock -w 1800 "$lock" || die "another build of $TREE holds $TREE.lock"
    if [[ -e $TREE/$TREE_DONE ]]; then
        exec {lock}>&-
        return 0
    fi
    local mirror t0=$SECONDS part="$TREE.partial"
    mirror=$(debian_mirror)
    log "building the Slurm 24.11 tree $TREE: debootstrap $TREE_SUITE from $mirror (once per machine, a few minutes)"
    rm -rf --one-file-system "$part"
    debootstrap --variant=minbase "$TREE_SUITE" "$part" "$mirror" >"$LOG/tree-build.log" 2>&1 ||
        die "debootstrap failed, see $LOG/tree-build.log"
    # As on the host: the packages' init scripts must not start system-wide daemons.
    printf '#!/bin/sh\nexit 101\n' >"$part/usr/sbin/policy-rc.d"
    chmod 755 "$part/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$part/etc/resolv.conf" 2>/dev/null || true
    # shellcheck disable=SC2016 # expanded by the inner bash
    unshare --mount --propagation private -- bash -c 'set -e; t=$1; shift
        mount -t proc proc "$t/proc"; mount --rbind /dev "$t/dev"
        chroot "$t" env DEBIAN_FRONTEND=noninteractive apt-get update -q
        chroot "$t" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
        chroot "$t" apt-get clean
        install -d -m 755 "$t/opt/slurm/bin"
        for f in $(chroot "$t" dpkg -L slurm-client | grep "^/usr/bin/"); do
            chroot "$t" dpkg-divert --quiet --local --rename --divert "/opt/slurm/bin/${f##*/}" --add "$f"
        done' tree "$part" "${TREE_PACKAGES[@]}" >>"$LOG/tree-build.log" 2>&1 ||
        die "installing ${TREE_PACKAGES[*]} in the tree failed, see $LOG/tree-build.log"
    [[ -x $part$TREE_SLURM_BIN/sbatch && ! -e $part/usr/bin/sbatch ]] ||
        die "the Slurm commands were not moved to $TREE_SLURM_BIN in the tree (log $LOG/tree-build.log)"
    date -u +%FT%TZ >"$part/$TREE_DONE"
    mv "$part" "$TREE"
    exec {lock}>&-
    log "tree $TREE built in $((SECONDS - t0)) s ($(du -sh "$TREE" | cut -f1))"
}

# ---------------------------------------------------------------------------------------------
# The cluster local24 in the tree. Its daemons are ordinary components of scripts/dev-cluster
# (pidfiles in $RUN, named NAME-local24), started through tree_argv.

readonly T24=local24
readonly T24_DIR="$STATE/$T24"

# slurm24 COMMAND...: a Slurm command of the tree against local24, as root.
slurm24() { SLURM_CONF=$(slurm_conf "$T24") tree_run "$@"; }

tree_user_exists() { chroot "$TREE" getent passwd "$1" >/dev/null 2>&1; }

# tree_user NAME SHELL: the user in the tree, with the host's uid and gid (the run folders are
# shared through the state dir, so the numbers must agree), not locked (UsePAM no, as on the host).
tree_user() {
    local name=$1 shell=$2 uid gid group
    uid=$(id -u "$name") gid=$(id -g "$name") group=$(id -gn "$name")
    if ! chroot "$TREE" getent group "$group" >/dev/null 2>&1; then
        chroot "$TREE" groupadd -g "$gid" "$group"
    fi
    if ! tree_user_exists "$name"; then
        chroot "$TREE" useradd --create-home -u "$uid" -g "$gid" -s "$shell" "$name"
        log "tree: created user $name ($shell, uid $uid)"
    fi
    chroot "$TREE" usermod -p '*' -s "$shell" "$name"
    install -d -o "$uid" -g "$gid" -m 700 "$TREE/home/$name/.ssh"
}

# tree_rc USER FILE TEXT: FILE in the user's tree home starts with TEXT (a chatty login and the
# PATH of the Slurm commands), the rest of the file kept.
tree_rc() {
    local name=$1 file="$TREE/home/$1/$2" text=$3 tmp
    if [[ -e $file ]] && [[ $(head -c "${#text}" "$file") == "$text" ]]; then return 0; fi
    tmp=$(mktemp)
    { printf '%s\n' "$text"; [[ -e $file ]] && cat "$file"; } >"$tmp"
    install -o "$(id -u "$name")" -g "$(id -g "$name")" -m 644 "$tmp" "$file"
    rm -f "$tmp"
}

ensure_tree_users() {
    local u name shell rc
    tree_user "$TEST_USER" /bin/bash
    # bash reads .bashrc for `ssh host command` (Debian's bash is built to), before its
    # non-interactive return: the noise line and the PATH go first.
    tree_rc "$TEST_USER" .bashrc "$NOISE_LINE
export PATH=\"$TREE_SLURM_BIN:\$PATH\" # the site's \"module load slurm\""
    for u in "${SHELL_USERS[@]}"; do
        IFS=: read -r name shell rc _ <<<"$u"
        tree_user "$name" "$shell"
        case $rc in
        # tcsh reads ~/.tcshrc (else ~/.cshrc) for every shell, `tcsh -c` included.
        .tcshrc) tree_rc "$name" "$rc" "echo \"Welcome to the remote-chain dev cluster, tcsh user (noise line from .tcshrc)\"
setenv PATH \"$TREE_SLURM_BIN:\${PATH}\" # the site's \"module load slurm\"" ;;
        # zsh reads only ~/.zshenv for `zsh -c` (no .zshrc, .zprofile or .zlogin).
        .zshenv) tree_rc "$name" "$rc" "echo \"Welcome to the remote-chain dev cluster, zsh user (noise line from .zshenv)\"
export PATH=\"$TREE_SLURM_BIN:\$PATH\" # the site's \"module load slurm\"" ;;
        *) die "no rc file text for $rc" ;;
        esac
    done
}

ensure_tree_dirs() {
    install -d -m 755 "$T24_DIR" "$T24_DIR/spool" "$T24_DIR/slurmdbd" "$T24_DIR/ssh" \
        "$T24_DIR/munge" "$RUN/munge-local24"
    install -d -m 700 "$T24_DIR/state" "$T24_DIR/munge/private"
    local u name
    for u in "${SHELL_USERS[@]}"; do
        name=${u%%:*}
        install -d -o "$name" -g "$(id -g "$name")" -m 755 "$STATE/work-$name"
    done
    install -d -m 755 "$TREE/run/sshd"
    # slurmctld resolves this machine's hostname (dies with `Unable to resolve` otherwise).
    cmp -s /etc/hosts "$TREE/etc/hosts" || cp /etc/hosts "$TREE/etc/hosts"
}

ensure_tree_keys() {
    local key="$T24_DIR/munge/private/munge.key"
    if [[ ! -e $key ]]; then
        tree_run mungekey --create --keyfile="$key" --bits=1024
        chmod 600 "$key"
    fi
    [[ -e $T24_DIR/ssh/ssh_host_ed25519_key ]] ||
        ssh-keygen -q -t ed25519 -N '' -C remote-chain-dev-host24 -f "$T24_DIR/ssh/ssh_host_ed25519_key"
}

# The dev client key may log in as every tree user.
tree_authorize() {
    local pub u name keys
    pub=$(cat "$CLIENT/id_ed25519.pub")
    for u in "$TEST_USER" "${SHELL_USERS[@]}"; do
        name=${u%%:*}
        keys="$TREE/home/$name/.ssh/authorized_keys"
        grep -qxF -- "$pub" "$keys" 2>/dev/null || printf '%s\n' "$pub" >>"$keys"
        chown "$(id -u "$name"):$(id -g "$name")" "$keys"
        chmod 600 "$keys"
    done
}

start_munged24() {
    running_pid munged-local24 >/dev/null && return 0
    local TREE_ARGV
    tree_argv
    rm -f "$MUNGE_SOCKET24" "$MUNGE_SOCKET24.lock"
    launch munged-local24 "${TREE_ARGV[@]}" /usr/sbin/munged \
        --key-file="$T24_DIR/munge/private/munge.key" --socket="$MUNGE_SOCKET24" \
        --pid-file="$(pidfile munged-local24)" --log-file="$LOG/munged-local24.log" \
        --seed-file="$T24_DIR/munge/private/munged.seed" --num-threads=4 --force
    wait_pid munged-local24 10
    wait_for 10 "munged-local24 to answer on $MUNGE_SOCKET24" \
        tree_run sh -c "munge -S '$MUNGE_SOCKET24' -n | unmunge -S '$MUNGE_SOCKET24'"
    log "munged-local24: running (pid $(running_pid munged-local24))"
}

mariadb_sql24() {
    tree_run mariadb --no-defaults --protocol=socket -S "$MARIADB_SOCKET24" -uroot -e "$1"
}

start_mariadb24() {
    running_pid mariadb-local24 >/dev/null && return 0
    local data="$T24_DIR/mariadb" TREE_ARGV
    tree_argv
    if [[ ! -d $data/mysql ]]; then
        log "mariadb-local24: initialising $data"
        rm -rf "$data"
        tree_run mariadb-install-db --no-defaults --datadir="$data" --user=root --skip-test-db \
            --auth-root-authentication-method=socket >"$LOG/mariadb-install-local24.log" 2>&1 ||
            die "mariadb-install-db (tree) failed, see $LOG/mariadb-install-local24.log"
    fi
    launch --no-wait mariadb-local24 setsid "${TREE_ARGV[@]}" /usr/sbin/mariadbd --no-defaults \
        --user=root --datadir="$data" --socket="$MARIADB_SOCKET24" \
        --pid-file="$(pidfile mariadb-local24)" --port="$DB_PORT24" --bind-address=127.0.0.1 \
        --skip-name-resolve --log-error="$LOG/mariadb-local24.log" \
        --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-lock-wait-timeout=900 \
        --max-connections=50
    wait_pid mariadb-local24 30
    chmod 644 "$(pidfile mariadb-local24)"
    wait_for 30 "mariadb-local24 to accept connections" mariadb_sql24 'SELECT 1'
    mariadb_sql24 "CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
        GRANT ALL ON slurm_acct_db.* TO '$DB_USER'@'127.0.0.1';
        CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
    log "mariadb-local24: running (pid $(running_pid mariadb-local24)), 127.0.0.1:$DB_PORT24"
}

dbd_answers24() { slurm24 timeout 10 sacctmgr -n -P show cluster format=cluster; }
# For poll: done when slurmdbd answers, or when it died (no use waiting for it then).
dbd_answers_or_died() { ! running_pid slurmdbd-local24 >/dev/null || dbd_answers24; }

start_slurmdbd24() {
    running_pid slurmdbd-local24 >/dev/null && return 0
    local TREE_ARGV
    tree_argv
    # Seen once on a fresh database: slurmdbd 24.11 died at its first start with
    # `fatal: _check_mysql_concat_is_sane: null result` (MariaDB 11.8 just initialised) and came
    # up at the next. So: up to 3 starts.
    local try
    for try in 1 2 3; do
        SLURM_CONF="$T24_DIR/slurmdbd/slurm.conf" launch slurmdbd-local24 "${TREE_ARGV[@]}" /usr/sbin/slurmdbd
        poll 20 running_pid slurmdbd-local24 && poll 30 dbd_answers_or_died && dbd_answers24 >/dev/null 2>&1 && break
        ((try < 3)) || die "slurmdbd-local24 did not answer sacctmgr after 3 starts (log $LOG/slurmdbd-local24.log)"
        log "slurmdbd-local24: start $try failed ($(tail -n 1 "$LOG/slurmdbd-local24.log" 2>/dev/null)); again"
        stop_component slurmdbd-local24
    done
    log "slurmdbd-local24: running (pid $(running_pid slurmdbd-local24)), port $DBD_PORT24"
}

ensure_accounting24() {
    local u name c existing
    existing=$(dbd_answers24)
    for c in "${TREE_CLUSTERS[@]}"; do
        grep -qx -- "$c" <<<"$existing" || slurm24 timeout 30 sacctmgr -i add cluster "$c" >/dev/null
    done
    for c in "${TREE_CLUSTERS[@]}"; do
        if [[ -z $(slurm24 timeout 10 sacctmgr -n -P show assoc cluster="$c" account="$SLURM_ACCOUNT" format=account) ]]; then
            slurm24 timeout 30 sacctmgr -i add account "$SLURM_ACCOUNT" cluster="$c" \
                description=remote-chain-dev organization=dev >/dev/null
        fi
        for u in "$TEST_USER" "${SHELL_USERS[@]}"; do
            name=${u%%:*}
            if [[ -z $(slurm24 timeout 10 sacctmgr -n -P show assoc cluster="$c" user="$name" format=user) ]]; then
                slurm24 timeout 30 sacctmgr -i add user "$name" account="$SLURM_ACCOUNT" cluster="$c" >/dev/null
            fi
        done
    done
}

start_cluster24() {
    local c=$1 conf TREE_ARGV
    conf=$(slurm_conf "$c")
    tree_argv
    if ! running_pid "slurmctld-$c" >/dev/null; then
        SLURM_CONF=$conf launch "slurmctld-$c" "${TREE_ARGV[@]}" /usr/sbin/slurmctld -f "$conf"
        wait_pid "slurmctld-$c" 20
    fi
    if ! running_pid "slurmd-$c" >/dev/null; then
        SLURM_CONF=$conf launch "slurmd-$c" "${TREE_ARGV[@]}" /usr/sbin/slurmd -f "$conf" -N "$(node_name "$c")"
        wait_pid "slurmd-$c" 20
    fi
}

start_sshd24() {
    running_pid sshd-local24 >/dev/null && return 0
    local TREE_ARGV
    tree_argv
    tree_run /usr/sbin/sshd -t -f "$T24_DIR/ssh/sshd_config" || die "the tree's sshd_config is invalid"
    launch sshd-local24 "${TREE_ARGV[@]}" /usr/sbin/sshd -f "$T24_DIR/ssh/sshd_config" -E "$LOG/sshd-local24.log"
    wait_pid sshd-local24 10
    log "sshd-local24: running (pid $(running_pid sshd-local24)), 127.0.0.1:$SSH_PORT_LOCAL24,$SSH_PORT_LOCAL24B"
}

# The tree, its users and local24's folders and keys (before the configs are written).
prepare_tree() {
    ensure_tree
    ensure_tree_users
    ensure_tree_dirs
    ensure_tree_keys
}

# local24's daemons, after the client key exists (the caller waits for the node, checks ssh).
start_tree() {
    tree_authorize
    start_munged24
    start_mariadb24
    start_slurmdbd24
    ensure_accounting24
    local c
    for c in "${TREE_CLUSTERS[@]}"; do start_cluster24 "$c"; done
    start_sshd24
}

down_tree() {
    local c
    stop_sshd sshd-local24
    for c in "${TREE_CLUSTERS[@]}"; do stop_component "slurmd-$c"; done
    for c in "${TREE_CLUSTERS[@]}"; do stop_component "slurmctld-$c"; done
    stop_component slurmdbd-local24
    stop_component mariadb-local24
    stop_component munged-local24
}
