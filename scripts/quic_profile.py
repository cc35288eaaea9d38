#!/usr/bin/env python3
"""Where a QUIC transfer's CPU goes, per end (issue 40, step 1), from a `perf record -g` of
`smbq bench`: every sample of the bench's client and server threads (comm `bench-client`,
`bench-server`), or of a server process, in a time window, is put in one category by its call
chain, and the shares are printed as a Markdown table.

    perf record -F 999 -g -o raw.data -- smbq bench raw --quic-stack quinn --repeats 1 --runtime 8
    scripts/quic_profile.py raw.data --time 50%-100%      # raw's QUIC half (tcp runs first)
    scripts/quic_profile.py fio.data --time T0,T1 --ends bench-client,pid=N   # an SMB server

Categories are matched in order, on the leaf frame first and then on the whole chain, so a
kernel copy under sendmsg counts as sendmsg and AES under header protection as header
protection. The rules are regular expressions below; they are a reading aid, not a
measurement of their own.
"""

import argparse
import collections
import re
import subprocess
import sys

# (category, where, pattern): where is "leaf" (the sampled frame) or "chain" (any frame).
RULES = [
    ("header protection", "chain",
     r"unprotect_header|protect_header|new_mask|HeaderProtectionKey|header_key|aes_hw_encrypt"),
    ("AEAD (AES-GCM seal/open)", "leaf",
     r"aes_gcm|gcm_|aead_|ghash|skip_iv|aes_hw_ctr|aesni_ctr|CRYPTO_gcm|EVP_AEAD|PacketKey|open_within|seal_in_place|CRYPTO_memcmp"),
    ("sendmsg (kernel send path, GSO)", "chain",
     r"__sys_sendmsg|__x64_sys_sendmsg|sendmmsg|udp_sendmsg|__sys_sendmmsg|__libc_sendmsg"),
    ("recvmsg (kernel receive path)", "chain",
     r"__sys_recvmsg|__x64_sys_recvmsg|recvmmsg|udp_recvmsg|__sys_recvmmsg|__libc_recvmsg"),
    ("ACK processing (loss detection, congestion control)", "chain",
     r"on_ack_received|on_packet_acked|detect_lost_packets|::on_ack\b|Controller>::on_ack|remove_in_flight"),
    ("ACK generation", "chain", r"populate_acks|PendingAcks|frame::Ack::encode|ack_frequency"),
    ("timers and pacing", "chain", r"tokio::time|Instant::now|clock_gettime|Pacer|pacing|vdso|timer_"),
    ("memory copies and buffers (user space)", "leaf",
     r"memmove|memcpy|memset|BytesMut|copy_from_slice|shared_v_drop|bytes::"),
    ("allocation and page faults", "leaf",
     r"malloc|_int_free|cfree|realloc|__rust_alloc|__rust_dealloc|_rjem_|sdallocx|exc_page_fault|clear_page|do_anonymous_page|handle_mm_fault|free_pages|unmap"),
    ("scheduling, wakeups and channels (futex, epoll, tokio)", "chain",
     r"futex|finish_task_switch|schedule\b|__schedule|try_to_wake_up|epoll|tokio::runtime|tokio::sync|park"),
    ("syscall entry and exit", "leaf", r"irqentry_exit_to_user_mode|do_syscall_64|entry_SYSCALL|syscall_exit"),
    ("quinn: stream and packet logic (other)", "leaf", r"quinn|bbr|BTreeMap|btree|binary_heap|iter::adapters"),
    ("unresolved", "leaf", r"^$|\[unknown\]"),
]
COMPILED = [(c, w, re.compile(p)) for c, w, p in RULES]


def samples(data: str, time: str | None):
    cmd = ["perf", "script", "-i", data, "-F", "comm,pid,ip,sym,dso"]
    if time:
        cmd += ["--time", time]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    comm, chain = None, []
    for line in p.stdout.splitlines():
        if not line.strip():
            if comm is not None:
                yield comm, chain
            comm, chain = None, []
            continue
        if not line.startswith((" ", "\t")):
            head = line.split()
            comm = f"{head[0]} pid={head[1]}" if len(head) > 1 else head[0]
            continue
        parts = line.strip().split(None, 1)
        chain.append(parts[1] if len(parts) > 1 else parts[0])
    if comm is not None:
        yield comm, chain


def category(chain: list[str]) -> str:
    leaf = chain[0] if chain else ""
    for name, where, rx in COMPILED:
        if where == "leaf" and rx.search(leaf):
            return name
        if where == "chain" and any(rx.search(f) for f in chain):
            return name
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--time", help="perf's --time window, e.g. 50%%-100%%")
    ap.add_argument("--ends", default="bench-client,bench-server",
                    help="the ends, comma-separated: a thread name (comm) prefix, or pid=N for "
                         "every thread of a process (an `smbq serve` the bench started)")
    args = ap.parse_args()
    ends = args.ends.split(",")
    counts = {e: collections.Counter() for e in ends}
    for comm, chain in samples(args.data, args.time):
        name, _, pid = comm.partition(" ")
        for e in ends:
            if (e.startswith("pid=") and pid == e) or (not e.startswith("pid=") and name.startswith(e)):
                counts[e][category(chain)] += 1
    names = [c for c, _, _ in RULES] + ["other"]
    print("| Category | " + " | ".join(ends) + " |")
    print("|---|" + "---:|" * len(ends))
    totals = {e: sum(counts[e].values()) or 1 for e in ends}
    for n in names:
        cells = [f"{100 * counts[e][n] / totals[e]:.1f} %" for e in ends]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print("| samples | " + " | ".join(str(sum(counts[e].values())) for e in ends) + " |")


if __name__ == "__main__":
    sys.exit(main())
