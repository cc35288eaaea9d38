"""Access-based share enumeration against the real binary: Samba's smbclient -L (srvsvc
NetShareEnumAll) and rpcclient netsharegetinfo show a session only the shares it may connect
to, unless `access_based_share_enum = false`."""

import re
import subprocess

import pytest

from conftest import SmbqServer
import smbclient

SHARES = {
    "open": "",
    "team": 'allowed_users = ["tester"]\n',
    "secret": 'allowed_users = ["nobody-else"]\n',
}


def config(workdir, *, switch=None, guest_share=False) -> str:
    """TOML with the shares above (and `lobby`, open to guests, when `guest_share`)."""
    shares = dict(SHARES)
    text = ""
    if switch is not None:
        text += f"access_based_share_enum = {'true' if switch else 'false'}\n"
    if guest_share:
        text += "guest_ok = true\n"
        shares["lobby"] = "guest_ok = true\n"
    for name, extra in shares.items():
        path = workdir / name
        path.mkdir()
        text += f'[share.{name}]\npath = "{path}"\n{extra}'
    return text


@pytest.fixture
def start(workdir):
    servers = []

    def start(**kw):
        s = SmbqServer(workdir, config=config(workdir, **kw))
        servers.append(s)
        return s

    yield start
    for s in servers:
        rc = s.stop()
        assert "panicked" not in s.server_log(), s.server_log()
        assert rc == 0, f"server exit code {rc}\n{s.server_log()}"


def listed(output: str) -> set[str]:
    """Share names from the table smbclient -L prints (the lines after the dashes under
    `Sharename`, up to the first line that is not indented)."""
    names = set()
    lines = iter(output.splitlines())
    for line in lines:
        if line.strip().startswith("Sharename"):
            next(lines, None)  # the dashes
            for row in lines:
                if not row.startswith(("\t", " ")) or not row.strip():
                    break
                names.add(row.split()[0])
            break
    return names


def list_anonymous(server) -> tuple[int, str]:
    """smbclient -L as a null session (-U% -N: empty user, no password)."""
    p = subprocess.run(
        ["smbclient", "-s", "/dev/null", "-p", str(server.port), "-U%", "-N",
         "-L", "127.0.0.1"],
        capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def list_user(server) -> tuple[int, str]:
    return smbclient.run(server, list_shares=True, user="tester", password=server.password,
                         timeout=120)


def get_info(server, share: str, anonymous: bool = False) -> str:
    """rpcclient netsharegetinfo (srvsvc NetShareGetInfo level 502 by default)."""
    user = ["-U%", "-N"] if anonymous else ["-U", f"tester%{server.password}"]
    p = subprocess.run(
        ["rpcclient", "-s", "/dev/null", "-p", str(server.port), *user, "127.0.0.1",
         "-c", f"netsharegetinfo {share}"],
        capture_output=True, text=True, timeout=120)
    return p.stdout + p.stderr


def not_found(out: str) -> bool:
    """WERROR 2310, which Samba's rpcclient names WERR_NERR_NETNAMENOTFOUND."""
    return "NETNAMENOTFOUND" in out


def found(out: str, share: str) -> bool:
    return re.search(rf"^netname:\s*{re.escape(share)}$", out, re.M) is not None


def test_anonymous_sees_only_ipc(start):
    server = start()  # the default: access-based enumeration on
    rc, out = list_anonymous(server)
    assert rc == 0, out
    names = listed(out)
    assert "IPC$" in names, out
    assert names.isdisjoint({"share", "open", "team", "secret"}), out


def test_anonymous_sees_guest_shares(start):
    server = start(guest_share=True)
    rc, out = list_anonymous(server)
    assert rc == 0, out
    assert listed(out) == {"IPC$", "lobby"}, out
    out = get_info(server, "secret", anonymous=True)
    assert not_found(out), out
    out = get_info(server, "lobby", anonymous=True)
    assert found(out, "lobby"), out


def test_user_sees_the_shares_they_may_connect_to(start):
    server = start(switch=True)
    rc, out = list_user(server)
    assert rc == 0, out
    assert listed(out) == {"share", "open", "team", "IPC$"}, out
    # The listing agrees with TREE_CONNECT.
    rc, out = smbclient.run(server, "ls", share="team", timeout=120)
    assert rc == 0, out
    rc, out = smbclient.run(server, "ls", share="secret", timeout=120)
    assert rc != 0 and "NT_STATUS_ACCESS_DENIED" in out, out
    # NetShareGetInfo answers for a hidden share as if it did not exist.
    out = get_info(server, "secret")
    assert not_found(out), out
    out = get_info(server, "team")
    assert found(out, "team"), out


def test_switch_off_lists_everything(start):
    server = start(switch=False)
    everything = {"share", "open", "team", "secret", "IPC$"}
    rc, out = list_user(server)
    assert rc == 0, out
    assert listed(out) == everything, out
    rc, out = list_anonymous(server)
    assert rc == 0, out
    assert listed(out) == everything, out
    out = get_info(server, "secret", anonymous=True)
    assert found(out, "secret"), out



@pytest.mark.parametrize("protocol", ["SMB2_10", "SMB3_11"])
def test_listing_under_required_encryption(workdir, protocol):
    """With `--encrypt required`, a 3.1.1 session lists shares (sealed, IPC$ included); a
    session that cannot encrypt (SMB 2.1) is refused at SESSION_SETUP (MS-SMB2 3.3.5.5,
    RejectUnencryptedAccess), so it never reaches IPC$ in the clear."""
    server = SmbqServer(workdir, extra_args=["--encrypt", "required"])
    try:
        p = subprocess.run(
            ["smbclient", "-s", "/dev/null", "-p", str(server.port),
             "-U", f"tester%{server.password}", "-m", protocol, "-L", "127.0.0.1"],
            capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    out = p.stdout + p.stderr
    if protocol == "SMB2_10":
        assert p.returncode != 0 and "session setup failed: NT_STATUS_ACCESS_DENIED" in out, out
    else:
        assert p.returncode == 0, out
        assert {"share", "IPC$"} <= listed(out), out
