#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, fuzz smoke runs, and the interop tests
# that drive the real smbq binary with Samba's smbclient and smbtorture on loopback ports.
# Installs what it needs (Debian 12; run as root or with sudo available).
#
#   ./scripts/test.sh            everything
#   ./scripts/test.sh --quick    skip the 1 GiB transfers (uses 16 MiB) and fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

step() { printf '\n==> %s (%s, %d s in)\n' "$*" "$(date -u +%T)" "$SECONDS"; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

step "installing test tools (smbclient, smbtorture, tshark, openssl, impacket, pytest)"
need=()
command -v smbclient >/dev/null || need+=(smbclient)
command -v smbtorture >/dev/null || need+=(samba-testsuite)
[[ -x /usr/sbin/smbd ]] || need+=(samba)  # reference smbd: tests/interop/samba_server.py
[[ -x /usr/sbin/sshd ]] || need+=(openssh-server)  # scp baseline of smbq bench (loss scenario)
command -v scp >/dev/null || need+=(openssh-client)
command -v tshark >/dev/null || need+=(tshark)
command -v openssl >/dev/null || need+=(openssl)
command -v promtool >/dev/null || need+=(prometheus)  # promtool checks /metrics (test_metrics.py)
command -v runuser >/dev/null || need+=(util-linux)  # the admin socket's other-user test; unshare
command -v ss >/dev/null || need+=(iproute2)  # which node a client is on (test_cluster_ca.py)
command -v setfacl >/dev/null || need+=(acl)  # a POSIX ACL narrower than the mode (per-user identities)
# A loop-mounted XFS, where block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE) is served
# (tests/interop/test_reflink.py); filefrag (e2fsprogs) shows the shared extents.
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v filefrag >/dev/null || need+=(e2fsprogs)
command -v python3 >/dev/null || need+=(python3)
# Samba's client from Debian unstable (smbclient 4.25+, SMB over QUIC with ngtcp2 + GnuTLS),
# debootstrapped into a cached chroot by tests/interop/samba_unstable.py.
command -v debootstrap >/dev/null || need+=(debootstrap)
# Kerberos (tests/interop/test_kerberos.py): a private MIT KDC (krb5kdc; kadmin.local from
# krb5-admin-server, whose kadmind never runs), kinit, and the GSS-API library smbq loads.
[[ -x /usr/sbin/krb5kdc ]] || need+=(krb5-kdc)
[[ -x /usr/sbin/kadmin.local ]] || need+=(krb5-admin-server)
command -v kinit >/dev/null || need+=(krb5-user)
# MIT's HTTPS transport, for kinit through smbq's KDC proxy (kdc = https://...).
[[ -e /usr/lib/x86_64-linux-gnu/krb5/plugins/tls/k5tls.so ]] || need+=(krb5-k5tls)
ldconfig -p | grep -q libgssapi_krb5.so.2 || need+=(libgssapi-krb5-2)
# Building MsQuic, the second QUIC stack (cargo feature msquic): cmake, and libnuma for its
# static library.
command -v cmake >/dev/null || need+=(cmake)
[[ -e /usr/include/numa.h ]] || need+=(libnuma-dev)
# Scale-out (cargo feature cluster, docs/cluster.md): protoc builds the etcd client, and the
# interop tests start a real three-member etcd (tests/interop/test_cluster.py) and a MooseFS
# mounted twice (test_cluster_moosefs.py).
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v etcd >/dev/null || need+=(etcd-server)
command -v mfsmount >/dev/null || need+=(moosefs-master moosefs-chunkserver moosefs-client)
if ((${#need[@]})); then
  as_root apt-get update -qq
  # tshark's package asks whether non-root users may capture; the default (no) is fine as root.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | as_root debconf-set-selections
  # Services are never started by an install here: krb5-admin-server's postinst would start
  # kadmind, which fails (no realm exists) and fails the install with it where nothing stops
  # it (a container without systemd or policy-rc.d).
  made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  if ((made_policy)); then as_root rm -f /usr/sbin/policy-rc.d; fi
fi
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install -q pytest
# impacket: a third client implementation (tests/interop/test_first_hour.py).
python3 -c 'import impacket' 2>/dev/null || python3 -m pip install -q impacket
python3 -c 'import xdist' 2>/dev/null || python3 -m pip install -q pytest-xdist  # smbtorture, 3 at a time
# Samba 4.25 and etcd 3.5+ from Debian unstable (tests/interop/samba_unstable.py): made in the
# background while the build below keeps the cores busy, since it mostly waits on the network
# and the disk (3 to 5 minutes on a clean machine, nothing once cached). The interop steps wait
# for it; should it fail, they make it again themselves and say why.
unstable_log=$(mktemp)
python3 tests/interop/samba_unstable.py >"$unstable_log" 2>&1 &
unstable_pid=$!
rustup component add clippy rustfmt >/dev/null 2>&1 || true
# A from-scratch build gains nothing from incremental state, which more than doubles target/.
export CARGO_INCREMENTAL=0
disk_report() { df -h --output=avail,target . /tmp | sed 's/^/    /'; }
disk_report

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy -D warnings (with the MsQuic stack; smbq-transport also without it)"
# Only smbq-transport has code for builds without the msquic feature (stack.rs and friends), so
# the workspace is linted once, with it, and smbq-transport again without it: a second
# workspace run cost 2.5 minutes of CI (2026-11-29).
cargo clippy --workspace --all-targets --features smbq/msquic,smbq/cluster -- -D warnings
cargo clippy -p smbq-transport --all-targets -- -D warnings

step "unit tests (with the MsQuic stack and the cluster feature)"
cargo test --workspace --quiet --features smbq/msquic,smbq/cluster

step "the server's unit tests on the second open-state implementation (crate::open_state)"
# The test binary the workspace run just built, run again: `cargo test -p smbq-server` would
# resolve other features and compile the crate's tests a second time.
server_tests=$(cargo test --workspace --features smbq/msquic,smbq/cluster --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "smbq_server" \
            and "lib" in t.get("kind", []) and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])')
[[ -x "$server_tests" ]] || { echo "test.sh: no smbq-server test binary found" >&2; exit 1; }
SMBQ_TEST_OPEN_STATE=one-table "$server_tests" -q

step "the patched quinn-proto's unit tests, the carried changes' among them (third_party/README.md; not a workspace member)"
CARGO_TARGET_DIR=target/quinn-proto cargo test --quiet --locked --no-default-features \
  --manifest-path third_party/quinn-proto/Cargo.toml --lib

if ((quick == 0)); then
  step "fuzz smoke runs"
  # A fixed seed keeps the gate reproducible; explore with random seeds by hand (fuzz/README.md).
  FUZZ_SEED=1 ./scripts/fuzz-smoke.sh 5
fi

step "new user: the README's set-up steps, as written (scripts/new-user.sh)"
./scripts/new-user.sh

# The interop tests run every QUIC case on quinn and on MsQuic, so the binary they drive has
# both, and the cluster feature for test_cluster.py. Built after new-user.sh, whose `cargo
# run` builds the README's default into the same place. The features change enough of the
# dependency tree that most of it compiles twice in either order: new-user.sh then this
# build took 534 s of CI on 2026-11-30, against 513 s for a build before new-user.sh, its
# default build, and this one again.
step "release build (with the MsQuic stack and the cluster feature)"
cargo build --release -p smbq --features msquic,cluster

step "building the SMB-over-QUIC interop peer (interop/smb-rs-quic, the crates.io smb client)"
cargo build --release --locked --manifest-path interop/smb-rs-quic/Cargo.toml

# CI (.ci/run sets SMBQ_CI_FREE_DISK=1) shares its disk: the interop tests move 1 GiB files and
# need none of the debug or fuzz builds, so those go first. A developer's tree is left alone.
if [[ "${SMBQ_CI_FREE_DISK:-0}" == 1 ]]; then
  rm -rf target/debug fuzz/target
fi
disk_report
avail_kb=$(df --output=avail -k /tmp | tail -1)
if ((quick == 0 && avail_kb < 4 * 1024 * 1024)); then
  echo "test.sh: only $((avail_kb / 1024)) MiB free in /tmp; the 1 GiB transfer tests need 4 GiB" >&2
  exit 1
fi

step "waiting for Debian unstable's Samba and etcd (made in the background since the start)"
if wait "$unstable_pid"; then
  cat "$unstable_log"
else
  echo "test.sh: making the unstable root failed; the tests try again:" >&2
  tail -20 "$unstable_log" >&2
fi
rm -f "$unstable_log"

step "interop: smbtorture 4.25's allowlist over TCP, with per-user identities, and over QUIC"
# smbtorture 4.25 from the unstable chroot (tests/interop/samba_unstable.py). Each test starts
# its own server and smbtorture process and mostly waits on the other, so three run at once
# (pytest-xdist): on the 2-core machine the 919 runs over TCP took 9 minutes and the 438 over
# QUIC 5 (2026-11-28); the allowlist grew from 461 to 539 tests on 2026-11-29 (1589 runs, 16
# minutes), then to 552 with the persistent-handle tests (1618 runs, 17.6 minutes). To keep CI
# inside its hour from a clean machine, the per-user run takes every second test of the
# allowlist (271 of 542; what a per-user identity changes is the kernel's say on each file,
# the same in every suite); SMBQ_TORTURE_PER_USER_EVERY=1 runs them all. From a clean
# machine the whole of CI then took 60.6 min (2026-11-29, 1347 runs in 15 min), so it takes
# every third now (181).
export SMBQ_TORTURE_PER_USER_EVERY="${SMBQ_TORTURE_PER_USER_EVERY:-3}"
python3 -m pytest -q -p no:cacheprovider --durations=15 -n 3 tests/interop/test_smbtorture.py

step "interop: smbclient, SMB over QUIC, impacket and smbq's client against the real binary"
if ((quick)); then export SMBQ_BIG_FILE_MB=16 SMBQ_QUIC_BIG_MB=16 SMBQ_CLIENT_BIG_MB=16; fi
# --durations: the slowest tests in the log, where the next trims of CI's hour are found.
python3 -m pytest -q -p no:cacheprovider --durations=25 tests/interop --ignore=tests/interop/test_smbtorture.py

step "all tests passed"
