#!/usr/bin/env python3
"""Regenerate docs/conformance.md: smbtorture results for smbq next to Samba's own smbd, both
from Debian's unstable suite (4.25 or newer; --samba system: this machine's 4.17, the history in
docs/conformance-4.17.md).

For each selected smbtorture suite the script lists the suite's tests (`smbtorture --list`), runs
every test in its own smbtorture process against a fresh smbq and against a fresh private Samba
smbd, and records PASS, FAIL or SKIP for each server. It then rewrites the conformance document,
keeping whatever follows its `<!-- notes -->` line.

Usage:
    python3 scripts/conformance.py           # default suites, writes docs/conformance.md
    python3 scripts/conformance.py --suites smb2.lease,smb2.oplock
    python3 scripts/conformance.py --tests smb2.lease.request,smb2.oplock.batch1   # print only
    python3 scripts/conformance.py --out /tmp/c.md --json /tmp/c.json
    python3 scripts/conformance.py --all --json /tmp/all.json   # every smb2 suite (1-2 hours)
    python3 scripts/conformance.py --all --json /tmp/all.json --resume   # go on after a stop
    python3 scripts/conformance.py --all --part 1/2 --json /tmp/p1.json  # half the tests, in
    python3 scripts/conformance.py --all --part 2/2 --json /tmp/p2.json  # two processes, then
    python3 scripts/conformance.py --all --merge /tmp/p1.json,/tmp/p2.json --json /tmp/all.json
    python3 scripts/conformance.py --all --merge /tmp/all.json --rerun-smbq --json /tmp/new.json

With --json the raw results are written after every test, so a long run that is stopped can go
on where it was with --resume (tests already in the file are not run again).

The servers come from the interop test fixtures (tests/interop): smbq is the already-built
target/release/smbq (or $SMBQ_BIN); Samba needs root (smbd switches to the share user). Tests
run one at a time on purpose: many of them are timing-sensitive.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "interop"))

from conftest import BINARY, USER, SmbqServer  # noqa: E402
from samba_server import DEFAULT_USER as SAMBA_USER, SambaServer, ensure_unix_user  # noqa: E402
from samba_unstable import Chroot  # noqa: E402
# The smbq setup of the smbtorture interop test, so both measure the same server: the extra
# `noperm` share and the per-test option overrides.
from test_smbtorture import (  # noqa: E402
    CA_SHARE, FO_SHARES, IGN_SYSACL_SHARE, NEEDS_USER2, USER2, USER2_PASSWORD, add_user2,
    extra_shares, share_for, torture_config, torture_options)

# Importing conftest pointed XDG_CACHE_HOME at a fresh temporary directory (so smbq's client
# memory stays out of the user's cache); nothing here uses it afterwards.
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

DEFAULT_SUITES = [
    "smb2.lease",
    "smb2.oplock",
    "smb2.durable-open",
    "smb2.durable-v2-open",
    "smb2.durable-v2-delay",
    "smb2.durable-open-disconnect",
    "smb2.replay",
]
TEST_TIMEOUT = 300  # seconds per smbtorture run (--timeout); a timeout counts as FAIL
# Entries of `smbtorture --list smb2` that are not tests but interactive helpers: they open files
# and wait for ever (for a human, or for a second smbtorture running smb2.check-sharemode, which
# finishes by itself and is run), so they are not run.
NOT_RUN = {
    "smb2.hold-oplock": "an interactive helper: holds oplocks until it is killed",
    "smb2.hold-sharemode": "an interactive helper: holds share modes until it is killed",
}
# Tests the comparison leaves out (they still run, and both results are shown), with why.
BLOCKS_A_CHANNEL = ("blocks one channel of a multichannel session, through Samba's test-only "
                    "FSCTL_SMBTORTURE_FORCE_UNACKED_TIMEOUT (smbd:FSCTL_SMBTORTURE = yes) or "
                    "iptables (torture:use_iptables); neither is offered to smbq's run")
# A path with "/" in an SMB2 CREATE: Samba takes "/" as a separator, smbq refuses it as Windows does
# (MS-FSCC 2.1.5.2 makes "/" invalid in a name; Windows servers answer OBJECT_NAME_INVALID, as
# SMB clients that sent "dir/file" learnt, e.g. hierynomus/smbj#169). The test's own subject (a
# CLOSE without POSTQUERY_ATTRIB answers zeros) holds on smbq: handlers/close.rs.
SLASH_IN_PATH = ("opens `smb2-timestamps/testfile.dat`: a `/` in an SMB2 path, which Samba takes "
                 "as a separator and smbq refuses as Windows does (OBJECT_NAME_INVALID)")
LEFT_OUT = [
    (re.compile(r"^smb2\.replay\.dhv2-pending3"), BLOCKS_A_CHANNEL),
    (re.compile(r"^smb2\.timestamps\.test_close_not_attrib$"), SLASH_IN_PATH),
]

def left_out(test: str) -> str | None:
    """Why `test` is left out of the comparison, or None."""
    if test in NOT_RUN:
        return "not run, " + NOT_RUN[test]
    for pattern, why in LEFT_OUT:
        if pattern.search(test):
            return why
    return None
NOTES_MARKER = "<!-- notes -->"
# The 2026-11-27 run under smbtorture 4.17 against smbd 4.17, kept as history: its per-suite
# passes become the last two columns of the 4.25 summary.
HISTORY_417 = ROOT / "docs" / "conformance-4.17.md"
NOTES_PLACEHOLDER = "Notes on tests left out go here.\n"

# Samba as its own selftest sets it up for these suites (selftest/target/Samba3.pm, 4.17): smbd
# grants durable handles only with `posix locking = no` (besides `kernel oplocks = no` and `kernel
# share modes = no`, the 4.17 defaults; see `durable handles` in smb.conf(5)) and its selftest
# runs the durable and replay suites on such a share; it has no named streams without a streams
# module (smb2.lease.request opens `lease.dat:stream`); it keeps Windows ACLs only with
# `acl_xattr` (every selftest file server share stacks it), without which the smb2.acls and
# smb2.create.acl* tests fail on Samba for want of storage rather than logic. The `noperm`
# share smb2.ioctl's tests use is, as in selftest, a directory with mode 0000.
# Encryption stays at Samba's default (offered, not required), as smbq's default is off.
SAMBA_OPTIONS = dict(encrypt="default",
                     extra_share=["posix locking = no", "vfs objects = acl_xattr streams_xattr"])
# Samba 4.25's selftest fileserver also turns persistent handles on (its CA shares need it).
SAMBA_425_GLOBAL = ["persistent handles = yes"]


def _open_dir(d: pathlib.Path, mode: int = 0o777, owner=None) -> pathlib.Path:
    d.mkdir(exist_ok=True)
    d.chmod(mode)
    if owner is not None:
        os.chown(d, owner.pw_uid, owner.pw_gid)
    return d


def samba_extra_shares(base: pathlib.Path, inside=str, owner=None) -> dict[str, list[str]]:
    """selftest's `noperm` (a directory with mode 0000), `acls_non_canonical`, `hideunread`,
    `fo`, `ca_fo`, `ca_fo_max_rwh` and `acl_xattr_ign_sysacl_windows` shares (Samba3.pm), in
    directories under `base`; `inside` gives a path as smbd sees it (in its chroot). The test
    user `owner` owns them, as the selftest user owns selftest's: a share that ignores the
    system ACL (acl_xattr:ignore system acls) grants the owner alone."""
    d = _open_dir(base / "noperm", 0)
    n = _open_dir(base / "noncanon", owner=owner)
    h = _open_dir(base / "hideunread", owner=owner)
    streams = "vfs objects = acl_xattr streams_xattr"
    # All three on one directory, as in selftest ($share_dir): the tests open the same file
    # through several of them.
    fo = _open_dir(base / "fo", owner=owner)
    ign = _open_dir(base / "ign", owner=owner)
    cluster = {name: [f"path = {inside(fo)}", "read only = no", streams,
                      "smb3 share cap:CLUSTER = yes", "smb3 share cap:SCALE OUT = no",
                      f"continuous availability = {'yes' if ca else 'no'}",
                      *(["smb3 ca:max lease mask = RWH"] if name == CA_SHARE else []),
                      "kernel share modes = no", "kernel oplocks = no", "posix locking = no"]
               for name, ca in FO_SHARES.items()}
    return {"noperm": [f"path = {inside(d)}", "read only = no", "wide links = yes"],
            "acls_non_canonical": [f"path = {inside(n)}", "read only = no", streams,
                                   "acl flag inherited canonicalization = no"],
            "hideunread": [f"path = {inside(h)}", "read only = no", streams,
                           "hide unreadable = yes"],
            **cluster,
            IGN_SYSACL_SHARE: [f"path = {inside(ign)}", "read only = no", streams,
                               "acl_xattr:ignore system acls = yes",
                               "acl_xattr:default acl style = windows"]}


# -- test discovery ------------------------------------------------------------------------------

def list_tests() -> list[str]:
    """Every runnable smbtorture test name, in --list order.

    `--list` prints `suite.test.test` (the last component repeats the test's name inside its
    testcase); the runnable name drops that repetition."""
    out = subprocess.run(smbtorture(["--list"]), capture_output=True, text=True,
                         check=True).stdout
    names = []
    for line in out.splitlines():
        line = line.strip()
        # The "smbtorture 4.25.x" banner; test names may hold spaces ("CREATE Existing").
        if not line or line.startswith("smbtorture "):
            continue
        parts = line.split(".")
        if len(parts) > 2 and parts[-1] == parts[-2]:
            parts.pop()
        name = ".".join(parts)
        if name not in names:
            names.append(name)
    return names


def suite_tests(all_tests: list[str], suite: str) -> list[str]:
    # The trailing dot keeps smb2.durable-open from also taking smb2.durable-open-disconnect; a
    # suite of one test (smb2.connect) is its own name.
    return [t for t in all_tests if t == suite or t.startswith(suite + ".")]


def all_suites(all_tests: list[str], top: str = "smb2") -> list[str]:
    """The suites under `top` (its second name component), in --list order."""
    suites: list[str] = []
    for t in all_tests:
        parts = t.split(".")
        if parts[0] == top and len(parts) > 1:
            suite = ".".join(parts[:2])
            if suite not in suites:
                suites.append(suite)
    return suites


# -- running one test ----------------------------------------------------------------------------

def classify(name: str, output: str) -> tuple[str, str]:
    """(PASS|FAIL|SKIP, reason) from smbtorture's subunit output, with the interop test's rule:
    a pass needs `success: NAME` and no `failure:` or `error:` line."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("failure:", "error:")):
            return "FAIL", _reason(lines, i)
    if f"success: {name}" in output:
        return "PASS", ""
    for i, line in enumerate(lines):
        if line.startswith("skip:"):
            return "SKIP", _reason(lines, i)
    tail = [l for l in lines if l.strip()][-1:]
    return "FAIL", "no result line" + (f" (last line: {tail[0].strip()})" if tail else "")


def _reason(lines: list[str], i: int) -> str:
    # Subunit puts details in a bracketed block after the result line (`failure: NAME [`,
    # message lines, `]`); the first message line is the useful part.
    line = lines[i].strip()
    if line.endswith("[") and i + 1 < len(lines) and lines[i + 1].strip() != "]":
        return f"{line.rstrip(' [')}: {lines[i + 1].strip()}"
    return line.rstrip(" [")


# With --samba unstable (the default): Debian unstable's Samba (smbtorture and smbd 4.25 or
# newer) in the chroot tests/interop/samba_unstable.py provisions; else this machine's.
UNSTABLE: Chroot | None = None


def smbtorture(args: list[str]) -> list[str]:
    if UNSTABLE is None:
        return ["smbtorture", *args]
    # In the chroot's /tmp, where killed runs leave their `smbtorture??????` directories.
    return ["chroot", str(UNSTABLE.root), "env", "-C", "/tmp", "smbtorture", *args]


def run_smbtorture(name: str, unc: str, port: int, user: str, password: str) -> dict:
    # The interop test's client options (torture_options: AES-GMAC alone where Samba's client
    # needs it against a server that picks AES-CMAC), the same for both servers.
    args = smbtorture(["-s", "/dev/null", unc, "-p", str(port), "-U", f"{user}%{password}",
                       "--fullname", "--format=subunit", "--option=torture:sharedelay=0",
                       *torture_options(name), name])
    start = time.monotonic()
    try:
        # smbtorture leaves `smbtorture??????` directories in its working directory when it
        # is killed; keep them out of the checkout.
        p = subprocess.run(args, capture_output=True, text=True, timeout=TEST_TIMEOUT,
                           cwd=tempfile.gettempdir())
        output = p.stdout + p.stderr
        result, reason = classify(name, output)
    except subprocess.TimeoutExpired as e:
        output = _text(e.stdout) + _text(e.stderr)
        result, reason = "FAIL", f"timeout after {TEST_TIMEOUT} s"
    return {"result": result, "reason": reason, "seconds": round(time.monotonic() - start, 2),
            # Enough of the output to see why a test did not pass, without bloating the JSON.
            "output": "" if result == "PASS" else output[-4000:]}


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode(errors="replace")


def run_on_smbq(name: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="smbq-conformance-") as d:
        workdir = pathlib.Path(d)
        server = SmbqServer(workdir, config=torture_config(name) + extra_shares(workdir))
        try:
            if name in NEEDS_USER2:
                add_user2(server)
            r = run_smbtorture(name, f"//127.0.0.1/{share_for(name)}", server.port, USER,
                               server.password)
        finally:
            rc = server.stop()
        log = server.server_log()
        # A server crash is a failure even if smbtorture happened to report success.
        if "panicked" in log or rc != 0:
            r["result"] = "FAIL"
            r["reason"] = f"smbq exit code {rc}" + (", panicked" if "panicked" in log else "")
            r["output"] += "\n--- smbq log ---\n" + log[-4000:]
        return r


def run_on_samba(name: str) -> dict:
    # A fresh smbd per test, like smbq: Samba keeps disconnected durable handles and lease state
    # in its databases after smbtorture exits, and a new file can reuse the inode such a stale
    # record is keyed by, so one test's leftovers could change the next test's result. Starting
    # smbd takes a fraction of a second. SambaServer(None) puts everything (share included) in
    # a private temporary directory that stop() removes.
    tmp = None if UNSTABLE is None else UNSTABLE.path("/tmp")
    noperm_base = pathlib.Path(tempfile.mkdtemp(prefix="smbq-samba-noperm-", dir=tmp))
    noperm_base.chmod(0o755)  # smbd, as the test user, must reach the shares inside

    def inside(path: pathlib.Path) -> str:
        return str(path) if UNSTABLE is None else "/" + str(path.relative_to(UNSTABLE.root))

    try:
        owner = ensure_unix_user(SAMBA_USER)
        server = SambaServer(None, user=SAMBA_USER,
                             extra_shares=samba_extra_shares(noperm_base, inside, owner),
                             chroot=UNSTABLE, **SAMBA_OPTIONS,
                             extra_global=SAMBA_425_GLOBAL if UNSTABLE else [])
    except BaseException:
        shutil.rmtree(noperm_base, ignore_errors=True)
        raise
    try:
        if name in NEEDS_USER2:
            server.add_user(USER2, USER2_PASSWORD)
        unc = f"//{server.host}/{share_for(name)}"
        r = run_smbtorture(name, unc, server.port, server.user, server.password)
        if r["result"] != "PASS":
            r["output"] += "\n--- samba log ---\n" + server.log_tail(60)
        return r
    finally:
        server.stop()
        shutil.rmtree(noperm_base, ignore_errors=True)


# -- the document --------------------------------------------------------------------------------

def versions() -> dict:
    def first_line(cmd: list[str]) -> str:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (p.stdout.strip().splitlines() or ["unknown"])[0]
        except OSError:
            return "unknown"

    def version(cmd: list[str]) -> str:
        # "smbtorture 4.17.12-Debian", "Version 4.17.12-Debian", "smbq 0.1.0": the last word.
        return first_line(cmd).split()[-1]

    root = [] if UNSTABLE is None else ["chroot", str(UNSTABLE.root)]
    smbd = "/usr/sbin/smbd" if UNSTABLE else shutil.which("smbd") or "/usr/sbin/smbd"
    return {
        "smbtorture": version(smbtorture(["--version"])),
        "samba-testsuite": first_line([*root, "dpkg-query", "-W", "-f=${Version}",
                                       "samba-testsuite"]),
        "smbd": version([*root, smbd, "--version"]),
        "smbq": version([str(BINARY), "--version"]),
        "commit": first_line(["git", "-C", str(ROOT), "describe", "--always", "--dirty"]),
    }


def history_counts(path: pathlib.Path) -> dict[str, tuple[str, str]]:
    """suite: (smbq passes, Samba passes) from an older run's summary table (the 4.17 one)."""
    counts = {}
    if path.exists():
        for line in path.read_text().splitlines():
            cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
            if len(cells) >= 5 and cells[0].startswith(("smb2", "total")) and cells[3].isdigit():
                counts[cells[0]] = (cells[3], cells[4])
    return counts


def results_from_doc(path: pathlib.Path) -> dict[str, dict]:
    """The results a committed document records (its per-test tables, and the reason given for
    each test only one server passes), for a run that repeats only some tests (--from-doc).
    Each keeps the commit line of that document as its smbq commit."""
    text = path.read_text()
    commit = re.search(r"^- smbq: .*\(commit (.*)\)$", text, re.M)
    reasons = {}
    for m in re.finditer(r"^- `([^`]+)` \((smbq|Samba) [A-Z ]+?(?:: (.*))?\)$", text, re.M):
        reasons[(m.group(1), m.group(2).lower())] = (m.group(3) or "").replace("\\|", "|")
    results: dict[str, dict] = {}
    suite = None
    for line in text.split("\n" + NOTES_MARKER + "\n", 1)[0].splitlines():
        if line.startswith("### smb2"):
            suite = line[4:].strip()
        m = re.match(r"^\| `([^`]+)`(?: \(left out\))? \| ([A-Z ]+) \| ([A-Z ]+) \|$", line)
        if m and suite:
            name = m.group(1)
            results[name] = {
                "suite": suite,
                **{server: {"result": m.group(i), "reason": reasons.get((name, server), ""),
                            "seconds": 0, "output": ""}
                   for i, server in ((2, "smbq"), (3, "samba"))},
                "smbq_commit": commit.group(1) if commit else "",
            }
    return results


def render(suites: dict[str, list[str]], results: dict[str, dict], ver: dict, date: str,
           notes: str, history: dict[str, tuple[str, str]] | None = None) -> str:
    def count(tests, server):
        return sum(results[t][server]["result"] == "PASS" for t in tests)

    def compared(tests):
        return [t for t in tests if left_out(t) is None]

    history_cols = " smbq 4.17 | Samba 4.17 |" if history else ""
    lines = [
        "# smbtorture conformance" + ("" if UNSTABLE else ": smbtorture 4.17 (history)"),
        "",
        "This file is generated by `python3 scripts/conformance.py"
        + ("" if UNSTABLE else " --samba system --out docs/conformance-4.17.md")
        + "`; edit only the notes at the",
        "end (everything after the `<!-- notes -->` line is kept when it is regenerated).",
        "",
        "Each test of the smbtorture suites below runs in its own `smbtorture` process against",
        "a fresh smbq (`target/release/smbq serve`, default settings) and against a fresh private",
        "Samba `smbd` on the same machine, so the two columns compare smbq with the reference",
        "implementation under the same client"
        + (": smbtorture and smbd from Debian's unstable suite, in the chroot"
           " tests/interop/samba_unstable.py provisions." if UNSTABLE else "."),
        "Samba runs with its stock settings plus the",
        "share options its own selftest gives these suites: `posix locking = no` (else it grants",
        "no durable handles), `vfs objects = acl_xattr streams_xattr` (else it stores no Windows",
        "ACLs and has no named streams), and the extra shares selftest names: `noperm` (a",
        "directory with mode 0000), `acls_non_canonical` and `hideunread`"
        + ("; from selftest's fileserver environment `persistent handles = yes` and the shares"
           " `fo`, `ca_fo` and `ca_fo_max_rwh` (`smb3 share cap:CLUSTER`, the last two"
           " `continuous availability = yes`), on which the persistent-open tests run, and"
           " `acl_xattr_ign_sysacl_windows` for smb2.acls-ignore-sysacl. smbq gets shares of"
           " the same names with its equivalent settings (`continuous_availability = true`"
           " on the `ca_` ones)" if UNSTABLE else
           "; smbq gets the same three shares with its equivalent settings")
        + " (tests/interop/test_smbtorture.py, scripts/conformance.py).",
        "Both servers get the interop test's client options (`torture_options`: AES-GMAC alone"
        " where Samba's client needs it).",
        "PASS means smbtorture reported success; SKIP means the test skipped itself",
        "(usually: the server does not offer the feature); FAIL includes errors, crashes and",
        f"runs over {TEST_TIMEOUT} s. NOT RUN marks the interactive helpers `--list` also names.",
        "",
        f"- Date: {date}",
        f"- smbtorture: {ver['smbtorture']} (Debian samba-testsuite {ver['samba-testsuite']}),"
        f" options `--option=torture:sharedelay=0`",
        f"- smbq: {ver['smbq']} (commit {ver['commit']})",
        f"- Samba: smbd {ver['smbd']}",
        "",
        "## Summary",
        "",
        "Passes are counted over the tests compared: all but the ones left out (see below);",
        "the next two columns count every test."
        + (" The last two are the passes of the 2026-11-27 run under smbtorture 4.17 against"
           " smbd 4.17 ([conformance-4.17.md](conformance-4.17.md)), where 4.17 had the suite"
           " (4.25 split smb2.acls into smb2.acls-with-sysacl and smb2.acls-ignore-sysacl, and"
           " moved the directory-lease tests to smb2.dirlease)." if history else ""),
        "",
        "| suite | tests | left out | smbq passes | Samba passes | smbq (all) | Samba (all) |"
        + history_cols,
        "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if history else ""),
    ]
    total = []

    def row(name, tests, bold=False):
        c = compared(tests)
        cells = [len(tests), len(tests) - len(c), count(c, "smbq"), count(c, "samba"),
                 count(tests, "smbq"), count(tests, "samba")]
        if history:
            cells += list(history.get(name, ("–", "–")))
        if bold:
            return f"| **{name}** | " + " | ".join(f"**{x}**" for x in cells) + " |"
        return f"| {name} | " + " | ".join(str(x) for x in cells) + " |"

    for suite, tests in suites.items():
        total += tests
        lines.append(row(suite, tests))
    if len(suites) > 1:
        lines.append(row("total", total, bold=True))
    out = [t for t in total if left_out(t) is not None]
    if out:
        lines += ["", "### Left out", ""]
        reasons: dict[str, list[str]] = {}
        for t in out:
            reasons.setdefault(left_out(t) or "", []).append(t)
        for why, tests in reasons.items():
            lines.append(f"- {why}: " + ", ".join(f"`{t}`" for t in tests) + ".")
    # The differences first: a reader wants these, not 500 rows of PASS | PASS.
    only = {"smbq": [], "samba": []}
    for t in compared(total):
        a, b = results[t]["smbq"]["result"], results[t]["samba"]["result"]
        if a == "PASS" and b != "PASS":
            only["smbq"].append(t)
        elif b == "PASS" and a != "PASS":
            only["samba"].append(t)
    for server, title in (("smbq", "Only smbq passes"), ("samba", "Only Samba passes")):
        other = "samba" if server == "smbq" else "smbq"
        lines += ["", f"### {title} ({len(only[server])})", ""]
        if not only[server]:
            lines.append("None.")
        for t in only[server]:
            r = results[t][other]
            why = f": {r['reason']}" if r.get("reason") else ""
            lines.append(f"- `{t}` ({'Samba' if other == 'samba' else 'smbq'} "
                         f"{r['result']}{why})".replace("|", "\\|"))
    lines.append("")
    lines.append("## Results per test")
    for suite, tests in suites.items():
        lines += ["", f"### {suite}", "", "| test | smbq | Samba |", "|---|---|---|"]
        for t in tests:
            mark = " (left out)" if left_out(t) else ""
            lines.append(f"| `{t}`{mark} | {results[t]['smbq']['result']} | "
                         f"{results[t]['samba']['result']} |")
    lines += ["", "## Notes", "", NOTES_MARKER]
    return "\n".join(lines) + "\n" + notes


def existing_notes(path: pathlib.Path) -> str:
    """Everything after the notes marker line of the current document, verbatim."""
    if path.exists():
        text = path.read_text()
        m = re.search(rf"^{re.escape(NOTES_MARKER)}[ \t]*(\r?\n|$)", text, re.MULTILINE)
        if m:
            return text[m.end():]
    return NOTES_PLACEHOLDER


# -- main ----------------------------------------------------------------------------------------

def main() -> int:
    global TEST_TIMEOUT, UNSTABLE
    ap = argparse.ArgumentParser(
        description="Run smbtorture suites against smbq and Samba and write the comparison "
                    "to docs/conformance.md.")
    ap.add_argument("--suites", default=",".join(DEFAULT_SUITES),
                    help="comma-separated smbtorture suites (default: %(default)s)")
    ap.add_argument("--tests", help="comma-separated runnable test names (e.g. "
                    "smb2.lease.request) within the selected suites; only these run and the "
                    "results are printed, the document is not written")
    ap.add_argument("--out", type=pathlib.Path,
                    help="document to write (default: docs/conformance.md, or with --samba "
                    "system docs/conformance-4.17.md)")
    ap.add_argument("--json", type=pathlib.Path, help="also write the raw results here "
                    "(after every test)")
    ap.add_argument("--all", action="store_true",
                    help="every smb2 suite of smbtorture --list (instead of --suites)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the results already in --json and run only the missing tests")
    ap.add_argument("--part", help="K/N: run only the K-th of N contiguous parts of the tests "
                    "(results to --json; the document is not written)")
    ap.add_argument("--merge", help="comma-separated result files of --part runs: their "
                    "results are taken as done (with --json, which receives them all)")
    ap.add_argument("--rerun-smbq", action="store_true",
                    help="with results from --merge or --resume: run smbq again on every test "
                    "(Samba's results are kept), e.g. after a server change")
    ap.add_argument("--from-doc", action="store_true",
                    help="take the results the --out document records as done and run only "
                    "the tests of --again, on both servers, then write the document again")
    ap.add_argument("--again", default="",
                    help="with --from-doc: comma-separated suites or tests to run afresh")
    ap.add_argument("--timeout", type=int, default=TEST_TIMEOUT,
                    help="seconds per smbtorture run (default: %(default)s)")
    ap.add_argument("--samba", choices=("unstable", "system"), default="unstable",
                    help="whose smbtorture and smbd: Debian unstable's (4.25 or newer, in the "
                    "chroot tests/interop/samba_unstable.py provisions; the default) or this "
                    "machine's (Debian 12: 4.17, the history in docs/conformance-4.17.md)")
    args = ap.parse_args()
    if args.resume and not args.json:
        ap.error("--resume needs --json")
    TEST_TIMEOUT = args.timeout
    if args.out is None:
        args.out = ROOT / "docs" / ("conformance.md" if args.samba == "unstable"
                                    else "conformance-4.17.md")
    if args.samba == "unstable":
        UNSTABLE = Chroot()
        UNSTABLE.install_samba()
        atexit.register(UNSTABLE.close)

    all_tests = list_tests()
    suites = {}
    wanted_suites = (all_suites(all_tests) if args.all
                     else filter(None, (s.strip() for s in args.suites.split(","))))
    for suite in wanted_suites:
        tests = suite_tests(all_tests, suite)
        if not tests:
            ap.error(f"smbtorture --list has no tests in suite {suite!r}")
        suites[suite] = tests
    if args.tests:
        wanted = [t.strip() for t in args.tests.split(",") if t.strip()]
        selected = {t for tests in suites.values() for t in tests}
        unknown = [t for t in wanted if t not in selected]
        if unknown:
            ap.error(f"not a test of the selected suites: {', '.join(unknown)}")
        suites = {s: [t for t in tests if t in wanted] for s, tests in suites.items()}
        suites = {s: tests for s, tests in suites.items() if tests}

    ver = versions()
    date = datetime.date.today().isoformat()
    plan = [(suite, t) for suite, tests in suites.items() for t in tests]
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        if not 1 <= k <= n:
            ap.error("--part K/N needs 1 <= K <= N")
        size = -(-len(plan) // n)
        plan = plan[(k - 1) * size:k * size]
    results: dict[str, dict] = {}
    for part in filter(None, (args.merge or "").split(",")):
        saved = json.loads(pathlib.Path(part).read_text())
        results.update(saved.get("results", {}))
    if args.from_doc:
        again = [a.strip() for a in args.again.split(",") if a.strip()]
        kept = results_from_doc(args.out)
        results.update({t: r for t, r in kept.items()
                        if not any(t == a or t.startswith(a + ".") for a in again)})
    if args.resume and args.json.exists():
        saved = json.loads(args.json.read_text())
        wanted = {x for _, x in plan}
        results.update({t: r for t, r in saved.get("results", {}).items() if t in wanted})
        print(f"resuming: {len(results)} of {len(plan)} tests already done", file=sys.stderr)

    planned = {t for _, t in plan}

    def checkpoint():
        if args.json:
            # A part (or a list of tests) keeps only its own tests, so parts merge cleanly.
            kept = (results if not (args.part or args.tests)
                    else {t: r for t, r in results.items() if t in planned})
            tmp = args.json.with_suffix(".tmp")
            tmp.write_text(json.dumps({"date": date, "versions": ver, "suites": suites,
                                       "timeout": TEST_TIMEOUT, "results": kept},
                                      indent=2) + "\n")
            tmp.replace(args.json)

    started = time.monotonic()
    for n, (suite, test) in enumerate(plan, 1):
        prev = results.get(test)
        if args.rerun_smbq and prev and prev.get("samba") and test not in NOT_RUN:
            # Samba's result stands (it does not depend on smbq); smbq runs again unless this
            # commit already did.
            if prev.get("smbq_commit") == ver["commit"]:
                continue
            prev["smbq"] = run_on_smbq(test)
            prev["smbq_commit"] = ver["commit"]
            checkpoint()
            print(f"[{n}/{len(plan)}] {test} smbq={prev['smbq']['result']} "
                  f"samba={prev['samba']['result']} (kept)", file=sys.stderr, flush=True)
            continue
        if prev is not None:
            continue
        if test in NOT_RUN:
            not_run = {"result": "NOT RUN", "reason": NOT_RUN[test], "seconds": 0, "output": ""}
            results[test] = {"suite": suite, "smbq": not_run, "samba": not_run}
            checkpoint()
            continue
        results[test] = {"suite": suite, "smbq": run_on_smbq(test), "samba": run_on_samba(test),
                         "smbq_commit": ver["commit"]}
        checkpoint()
        short = test[len(suite) + 1:]
        print(f"[{n}/{len(plan)}] {suite} {short} smbq={results[test]['smbq']['result']} "
              f"samba={results[test]['samba']['result']}", file=sys.stderr, flush=True)
    print(f"{len(plan)} tests in {time.monotonic() - started:.0f} s", file=sys.stderr)

    checkpoint()
    if args.tests or args.part:
        # A partial run must not overwrite the document; show the outcome instead.
        for suite, test in plan:
            r = results[test]
            print(f"{test}: smbq={r['smbq']['result']} samba={r['samba']['result']}")
            for server in ("smbq", "samba"):
                if r[server]["reason"]:
                    print(f"    {server}: {r[server]['reason']}")
        return 0

    # The commit smbq's results ran on (several, if parts ran on different ones).
    commits = collections.Counter(r["smbq_commit"] for r in results.values()
                                  if r.get("smbq_commit"))
    if commits:
        ver["commit"] = ", ".join(c for c, _ in commits.most_common())
    history = history_counts(HISTORY_417) if UNSTABLE else None
    doc = render(suites, results, ver, date, existing_notes(args.out), history)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(doc)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
