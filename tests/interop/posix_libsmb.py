"""The SMB3 POSIX extensions through Samba's own client library (python3-samba's libsmb, the
bindings Samba's smb3unix tests use), run inside the Debian-unstable chroot against smbq:

    python3 posix_libsmb.py HOST TRANSPORT USER PASSWORD [CHECK...]

TRANSPORT is Samba's `client smb transports` value: `tcp:PORT` or `quic:PORT`.

Each check prints `ok NAME` or `FAIL NAME: why`; the exit status is the number of failures.
The behaviours checked are the ones Samba 4.25's smbd has (its python/samba/tests/smb3unix.py
states them), written here from scratch: modes, owners and link counts in POSIX listings,
POSIX names, POSIX delete of an open file, chmod through the NFS-mode SID, append writes,
FILE_FS_POSIX_INFORMATION, and what Windows opens of the same files see. (test_posix.py runs
it.)"""

import stat
import sys
import traceback

from samba import NTSTATUSError, credentials, ntstatus, reparse_symlink
from samba.dcerpc import security
from samba.samba3 import libsmb_samba_internal as libsmb
from samba.samba3 import param as s3param

HOST, TRANSPORT, USER, PASSWORD = sys.argv[1:5]
ONLY = set(sys.argv[5:])
SHARE = "share"
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def connect(posix=True, **kw):
    lp = s3param.get_context()
    lp.load_default()
    lp.set("client smb transports", TRANSPORT)
    lp.set("tls verify peer", "no_check")
    creds = credentials.Credentials()
    creds.guess(lp)
    creds.set_username(USER)
    creds.set_password(PASSWORD)
    return libsmb.Conn(HOST, SHARE, lp, creds, posix=posix, **kw)


def posix_ctx(mode):
    return [(libsmb.SMB2_CREATE_TAG_POSIX, libsmb.unix_mode_to_wire(mode).to_bytes(4, "little"))]


def create(c, name, mode=0o644, **kw):
    kw.setdefault("DesiredAccess", security.SEC_FILE_ALL)
    kw.setdefault("CreateDisposition", libsmb.FILE_CREATE)
    kw.setdefault("ShareAccess", 7)
    f, _, cc = c.create_ex(name, CreateContexts=posix_ctx(mode), **kw)
    return f, cc


def posix_list(c, mask="*"):
    return {e["name"]: e for e in c.list("", mask=mask, info_level=libsmb.SMB2_FIND_POSIX_INFORMATION)}


def status_of(fn):
    try:
        fn()
    except NTSTATUSError as e:
        return e.args[0]
    return ntstatus.NT_STATUS_OK


def expect(cond, why):
    if not cond:
        raise AssertionError(why)


@check
def negotiate():
    expect(connect().have_posix(), "the POSIX context is not answered")
    expect(not connect(posix=False).have_posix(), "answered without being asked")
    s = status_of(lambda: connect(posix=False, negotiate_contexts=[(0x100, b"01234")]))
    expect(s == ntstatus.NT_STATUS_INVALID_PARAMETER, f"a 5-byte context gave {s:#x}")
    c = connect(posix=False, negotiate_contexts=[(0x100, b"0123456789012345")])
    expect(not c.have_posix(), "an unknown 16-byte tag was answered")


@check
def modes_owners_and_links_are_listed():
    c = connect()
    f, cc = create(c, "\\mode-file", 0o640)
    c.write(f, buffer=b"data", offset=0)
    c.close(f)
    expect(cc and cc[0][0] == libsmb.SMB2_CREATE_TAG_POSIX, f"create contexts {cc!r}")
    f, _ = create(c, "\\mode-dir", 0o750, CreateOptions=libsmb.FILE_DIRECTORY_FILE,
                  DesiredAccess=security.SEC_STD_ALL)
    c.close(f)
    got = posix_list(c)
    fe, de = got["mode-file"], got["mode-dir"]
    expect(stat.S_ISREG(fe["perms"]) and stat.S_IMODE(fe["perms"]) == 0o640, f"file {fe}")
    expect(fe["nlink"] == 1 and fe["size"] == 4, f"file {fe}")
    expect(fe["owner_sid"].startswith("S-1-") and fe["group_sid"].startswith("S-1-"), f"file {fe}")
    expect(stat.S_ISDIR(de["perms"]) and stat.S_IMODE(de["perms"]) == 0o750, f"dir {de}")
    expect(de["nlink"] == 2 and de["attrib"] == libsmb.FILE_ATTRIBUTE_DIRECTORY, f"dir {de}")


@check
def dotdot_at_the_share_root_says_nothing():
    dotdot = posix_list(connect())[".."]
    expect(dotdot["owner_sid"] == "S-1-0-0" and dotdot["group_sid"] == "S-1-0-0", f"{dotdot}")
    expect(dotdot["ino"] == 0 and dotdot["dev"] == 0, f"{dotdot}")


@check
def names_are_case_sensitive_and_take_reserved_characters():
    c = connect()
    f, _ = create(c, "\\xx")
    c.close(f)
    s = status_of(lambda: c.create_ex("\\XX", CreateDisposition=libsmb.FILE_OPEN,
                                      CreateContexts=posix_ctx(0)))
    expect(s == ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND, f"XX opened xx ({s:#x})")
    names = ["a ", "a.", ". ", ">", "<", "?", "a:b", "*"]
    for n in names:
        f, _ = create(c, "\\" + n, DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE)
        c.close(f)
    got = posix_list(c)
    missing = [n for n in names if n not in got]
    expect(not missing, f"not listed: {missing}")


@check
def an_open_file_can_be_unlinked():
    c = connect()
    f, _ = create(c, "\\unlinked")
    c.write(f, buffer=b"still here", offset=0)
    d, _ = create(c, "\\unlinked", CreateDisposition=libsmb.FILE_OPEN,
                  DesiredAccess=security.SEC_STD_DELETE | security.SEC_FILE_READ_ATTRIBUTE)
    c.delete_on_close(d, True)
    c.close(d)
    expect("unlinked" not in posix_list(c), "the name stays while a POSIX open has the file")
    expect(c.read(f, 0, 10) == b"still here", "the open lost its data")
    f2, _ = create(c, "\\unlinked")
    c.write(f2, buffer=b"new", offset=0)
    c.close(f)
    c.close(f2)
    expect(posix_list(c)["unlinked"]["size"] == 3, "the old open's close touched the new file")


@check
def a_windows_close_unlinks_under_a_posix_delete_on_close():
    w, p = connect(posix=False), connect()
    fw = w.create("win-doc", DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE,
                  ShareAccess=7, CreateDisposition=libsmb.FILE_CREATE)
    fp, _ = create(p, "win-doc", 0o600, CreateDisposition=libsmb.FILE_OPEN,
                   DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE)
    w.delete_on_close(fw, True)
    p.delete_on_close(fp, True)
    w.close(fw)
    names = {e["name"] for e in w.list("", mask="win-doc")}
    expect("win-doc" not in names, "still listed after the last Windows open closed")
    p.close(fp)


@check
def chmod_through_the_nfs_mode_sid():
    c = connect()
    f, _ = create(c, "\\chmod-me", 0o600)
    c.close(f)
    f, _ = create(c, "\\chmod-me", CreateDisposition=libsmb.FILE_OPEN,
                  DesiredAccess=security.SEC_STD_WRITE_DAC | security.SEC_FILE_READ_ATTRIBUTE)
    ace = security.ace()
    ace.type = security.SEC_ACE_TYPE_ACCESS_ALLOWED
    ace.trustee = security.dom_sid("S-1-5-88-3-420")  # 0644
    sd = security.descriptor()
    sd.type = security.SEC_DESC_SELF_RELATIVE | security.SEC_DESC_DACL_PRESENT
    sd.dacl = security.acl()
    sd.dacl.revision = security.SECURITY_ACL_REVISION_NT4
    sd.dacl_add(ace)
    c.set_sd(f, sd, security.SECINFO_DACL)
    c.close(f)
    mode = stat.S_IMODE(posix_list(c)["chmod-me"]["perms"])
    expect(mode == 0o644, f"mode {mode:o} after chmod 644")


@check
def a_read_only_file_is_deleted_by_a_posix_open():
    w, p = connect(posix=False), connect()
    h, _, _ = w.create_ex("ro-file", DesiredAccess=security.SEC_STD_ALL, ShareAccess=7,
                          CreateDisposition=libsmb.FILE_CREATE,
                          FileAttributes=libsmb.FILE_ATTRIBUTE_READONLY)
    s = status_of(lambda: w.delete_on_close(h, True))
    expect(s == ntstatus.NT_STATUS_CANNOT_DELETE, f"a Windows open deleted it ({s:#x})")
    w.close(h)
    h, _ = create(p, "ro-file", 0o666, CreateDisposition=libsmb.FILE_OPEN,
                  DesiredAccess=security.SEC_STD_DELETE | security.SEC_FILE_WRITE_ATTRIBUTE)
    p.delete_on_close(h, True)
    p.close(h)
    expect("ro-file" not in posix_list(p), "still there")


@check
def posix_fs_information_on_posix_connections_only():
    info = connect().get_posix_fs_info()
    expect(info["optimal_transfer_size"] > 0 and info["block_size"] > 0, f"{info}")
    s = status_of(lambda: connect(posix=False).get_posix_fs_info())
    expect(s == ntstatus.NT_STATUS_INVALID_INFO_CLASS, f"a Windows connection got {s:#x}")


@check
def an_append_only_posix_handle_appends():
    w, p = connect(posix=False), connect()
    ph, _ = create(p, "\\appended", 0o644,
                   DesiredAccess=security.SEC_FILE_APPEND_DATA | security.SEC_FILE_READ_DATA,
                   ShareAccess=libsmb.FILE_SHARE_READ | libsmb.FILE_SHARE_WRITE)
    wh = w.create("appended", DesiredAccess=security.SEC_FILE_APPEND_DATA,
                  ShareAccess=libsmb.FILE_SHARE_READ | libsmb.FILE_SHARE_WRITE,
                  CreateDisposition=libsmb.FILE_OPEN)
    w.write(wh, buffer=b"hello", offset=0)
    s = status_of(lambda: p.write(ph, buffer=b"world", offset=0))
    expect(s == ntstatus.NT_STATUS_INVALID_PARAMETER, f"an offset-0 write gave {s:#x}")
    p.write(ph, buffer=b" world", offset=libsmb.VFS_PWRITE_APPEND_OFFSET)
    info = p.qfileinfo(ph, libsmb.FSCC_FILE_POSIX_INFORMATION)
    expect(info["size"] == 11, f"size {info['size']}")
    expect(p.read(ph, 0, 11) == b"hello world", "not appended")
    p.close(ph)
    w.close(wh)


@check
def copy_chunk_into_a_posix_handle():
    c = connect()
    s, _ = create(c, "\\cc-src", DesiredAccess=security.SEC_GENERIC_ALL)
    d, _ = create(c, "\\cc-dst", DesiredAccess=security.SEC_GENERIC_WRITE)
    c.write(s, buffer=b"data", offset=0)
    written = c.copy_chunk(s, d, 4, 0, 0)
    expect(written == 4, f"copied {written}")
    c.close(s)
    c.close(d)


@check
def a_symlink_is_answered_with_where_it_points():
    """Stored as data, never followed; an open without FILE_OPEN_REPARSE_POINT is told the
    target, byte for byte, wherever it points (Samba's smb2symlink tests state the same)."""
    c = connect(posix=False)
    for target, flags in (("foo", 1), ("/etc", 0), ("../../../etc/passwd", 1)):
        h = c.create("syml", CreateDisposition=libsmb.FILE_OPEN_IF,
                     DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE
                     | security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE,
                     CreateOptions=libsmb.FILE_OPEN_REPARSE_POINT)
        c.fsctl(h, libsmb.FSCTL_SET_REPARSE_POINT,
                reparse_symlink.symlink_put(target, target, 0, flags), 0)
        blob = c.fsctl(h, libsmb.FSCTL_GET_REPARSE_POINT, b"", 1024)
        tag, (subst, _, _, _) = reparse_symlink.get(blob)
        expect((tag, subst) == ("IO_REPARSE_TAG_SYMLINK", target), f"read back {tag} {subst}")
        try:
            c.create_ex("syml")
            raise AssertionError(f"{target}: opened through the link")
        except NTSTATUSError as e:
            expect(e.args[0] == ntstatus.NT_STATUS_STOPPED_ON_SYMLINK, f"{target}: {e.args[0]:#x}")
            got = e.args[2]
            want = {"unparsed_path_length": 0, "substitute_name": target,
                    "print_name": target, "flags": flags}
            expect({k: got.get(k) for k in want} == want, f"{target}: {got}")
        if target == "foo":
            # Met on the way to another name: what is left of the name is unparsed ("\\bar",
            # which Samba's library reports in characters).
            try:
                c.create_ex("syml\\bar")
                raise AssertionError("opened a name below the link")
            except NTSTATUSError as e:
                expect(e.args[0] == ntstatus.NT_STATUS_STOPPED_ON_SYMLINK, f"below: {e.args[0]:#x}")
                got = e.args[2]
                expect((got.get("unparsed_path_length"), got.get("substitute_name")) == (4, "foo"),
                       f"below: {got}")
        c.delete_on_close(h, True)
        c.close(h)


def main():
    failed = 0
    for fn in CHECKS:
        if ONLY and fn.__name__ not in ONLY:
            continue
        try:
            fn()
            print(f"ok {fn.__name__}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            failed += 1
            why = e.args[0] if isinstance(e, NTSTATUSError) else e
            print(f"FAIL {fn.__name__}: {why!r}")
            traceback.print_exc(file=sys.stderr)
    sys.exit(failed)


main()
