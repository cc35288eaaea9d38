"""Helpers to run Samba's smbclient against a server, hermetically (-s /dev/null)."""

import subprocess


def run(server, command: str | None = None, *, share="share", user=None, password=None,
        extra=(), list_shares=False, timeout=600, cwd=None):
    user = user or "tester"
    password = server.password if password is None else password
    args = ["smbclient", "-s", "/dev/null", "-p", str(server.port), "-U", f"{user}%{password}"]
    if list_shares:
        args += ["-L", "127.0.0.1"]
    else:
        args += [f"//127.0.0.1/{share}"]
    args += list(extra)
    if command is not None:
        args += ["-c", command]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout + p.stderr
