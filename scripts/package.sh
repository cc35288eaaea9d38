#!/usr/bin/env bash
# Builds the Debian package (target/debian/smbq_*.deb) from the release binary: a man page
# from `smbq --help` (help2man), then cargo-deb with crates/smbq/Cargo.toml's metadata
# (systemd unit packaging/smbq.service, /etc/smbq/smbq.toml as a conffile, the smbq user
# made by packaging/debian/postinst). Installs help2man and cargo-deb when missing.
#
#   ./scripts/package.sh            build the release binary if there is none, then package
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

if ! command -v help2man >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq help2man >/dev/null
fi
command -v cargo-deb >/dev/null || cargo install cargo-deb --locked --version 3.8.0
[[ -x target/release/smbq ]] || cargo build --release -p smbq

mkdir -p target/man
help2man --no-info --section 1 \
  --name "SMB 3.1.1 file server over TCP and QUIC, with its client" \
  target/release/smbq | gzip -9n > target/man/smbq.1.gz
# Symbols stay in the build (profile.release debug = 1, for perf); the package ships stripped.
cargo deb -p smbq --no-build --strip --output target/debian/
ls -1 target/debian/*.deb
