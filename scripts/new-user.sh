#!/usr/bin/env bash
# Follows the README's "Set up" section the way a new user would, on this checkout, and fails
# if a step does not work as written: installs the binary with the README's command, starts
# the server with the README's command for users without root, runs each `smbq: try:` command
# the server printed (with the password it printed), adds an account with the README's
# `smbq user add` line while the server runs and logs on with it at once, and stops the server.
#
# What is not literal, and why: `cargo install` gets `--root TMP` (the user's ~/.cargo/bin is
# left alone) and reuses ./target; the README's ports are swapped for free ones only if they
# are taken on this machine; passwords go in through $PASSWD (smbclient) and $SMBQ_PASSWORD
# (smbq) instead of a prompt. Runs in the checkout's root, where the README's `./share` and
# `./.smbq` land; both must not exist yet and are removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

fail() { echo "new-user: FAILED: $*" >&2; exit 1; }
say() { echo "new-user: $*"; }

for p in share .smbq; do
  [[ ! -e $p ]] || fail "./$p exists; move it away first (the README's commands create it)"
done
tmp=$(mktemp -d /tmp/smbq-new-user.XXXXXX)
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then kill "$server_pid" || true; fi
  rm -rf "$root/share" "$root/.smbq" "$tmp"
}
trap cleanup EXIT

# The commands, as the README has them (comments after # dropped).
readme_line() { grep -E "$1" README.md | head -1 | sed -e 's/[[:space:]]*#.*$//' || true; }
serve=$(readme_line '^cargo run --release -- serve .*--tcp-port')
install=$(readme_line '^cargo install ')
add_user=$(readme_line "^echo '.*' \| smbq user add ")
[[ -n $serve ]] || fail "README: no 'cargo run --release -- serve ... --tcp-port' line in a set-up block"
[[ -n $install ]] || fail "README: no 'cargo install ...' line"
[[ -n $add_user ]] || fail "README: no \"echo '...' | smbq user add NAME\" line"

port_free() { # PROTO PORT
  python3 - "$1" "$2" <<'EOF'
import socket, sys
kind = socket.SOCK_STREAM if sys.argv[1] == "tcp" else socket.SOCK_DGRAM
s = socket.socket(socket.AF_INET6, kind)
try:
    s.bind(("::", int(sys.argv[2])))
except OSError:
    sys.exit(1)
EOF
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tcp_port=$(sed -nE 's/.*--tcp-port ([0-9]+).*/\1/p' <<<"$serve")
quic_port=$(sed -nE 's/.*--quic-port ([0-9]+).*/\1/p' <<<"$serve")
[[ -n $tcp_port && -n $quic_port ]] || fail "README serve line names no --tcp-port/--quic-port: $serve"
if ! port_free tcp "$tcp_port" || ! port_free udp "$quic_port"; then
  new_tcp=$(free_port); new_quic=$(free_port)
  say "ports $tcp_port/$quic_port are taken here; using $new_tcp/$new_quic"
  serve=${serve/--tcp-port $tcp_port/--tcp-port $new_tcp}
  serve=${serve/--quic-port $quic_port/--quic-port $new_quic}
fi

say "step 1: $install"
CARGO_TARGET_DIR=$root/target bash -c "$install --root '$tmp/inst' --quiet" \
  || fail "the README's install command failed"
export PATH="$tmp/inst/bin:$PATH"
[[ $(command -v smbq) == "$tmp/inst/bin/smbq" ]] || fail "smbq is not on PATH after installing"
smbq --version >/dev/null || fail "smbq --version"

say "step 2: $serve"
# A new user has none of the test suite's settings.
env -u SMBQ_USER -u SMBQ_PASSWORD -u SMBQ_LOG bash -c "exec $serve" \
  >"$tmp/serve.out" 2>"$tmp/serve.err" &
server_pid=$!
for _ in $(seq 1 600); do
  grep -q '^smbq: listening' "$tmp/serve.out" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/serve.err" >&2; fail "the server exited"; }
  sleep 0.2
done
grep -q '^smbq: listening' "$tmp/serve.out" || { cat "$tmp/serve.err" >&2; fail "no ready line"; }
for _ in $(seq 1 50); do grep -q '^smbq: try: ' "$tmp/serve.err" && break; sleep 0.1; done
password=$(sed -nE "s/^smbq: created account '[^']+' with password: (.+)$/\1/p" "$tmp/serve.err")
[[ -n $password ]] || { cat "$tmp/serve.err" >&2; fail "no password printed for the first account"; }
mapfile -t tries < <(sed -n 's/^smbq: try: //p' "$tmp/serve.err")
((${#tries[@]} >= 2)) || { cat "$tmp/serve.err" >&2; fail "expected a smbclient and a smbq try line"; }

n=3
for cmd in "${tries[@]}"; do
  say "step $n: $cmd"
  n=$((n + 1))
  case $cmd in
    smbclient\ *) out=$(PASSWD=$password bash -c "$cmd" 2>&1) || { echo "$out" >&2; fail "$cmd"; } ;;
    smbq\ *) out=$(SMBQ_PASSWORD=$password XDG_CACHE_HOME=$tmp/cache bash -c "$cmd" 2>&1) \
      || { echo "$out" >&2; fail "$cmd"; } ;;
    *) fail "unknown try line: $cmd" ;;
  esac
  grep -q 'NT_STATUS_' <<<"$out" && { echo "$out" >&2; fail "$cmd"; }
done

# The README's account line, against the running server (its default state directory).
say "step $n: $add_user (while the server runs)"
out=$(bash -c "$add_user" 2>&1) || { echo "$out" >&2; fail "$add_user"; }
name=$(sed -nE "s/.*smbq user add ([^ ]+).*/\1/p" <<<"$add_user")
pass=$(sed -nE "s/^echo '([^']*)'.*/\1/p" <<<"$add_user")
smbclient_line=$(grep '^smbclient ' <<<"$(printf '%s\n' "${tries[@]}")" | head -1)
as_new=$(sed -E "s/-U [^ ]+/-U $name/" <<<"$smbclient_line")
out=$(PASSWD=$pass bash -c "$as_new" 2>&1) || { echo "$out" >&2; fail "the new account cannot log on: $as_new"; }

kill "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=
((rc == 0)) || { cat "$tmp/serve.err" >&2; fail "the server exited with $rc on SIGTERM"; }
say "every step of the README's set-up worked as written"
