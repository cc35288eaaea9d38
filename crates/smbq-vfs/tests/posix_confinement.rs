//! The POSIX backend must never reach outside its share root, whatever the share contains.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::Bytes;
use smbq_vfs::{
    CreateMode, FileKind, OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs, is_confinement_error,
};
use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A temp dir holding `outside/secret` and the share root `share/`.
struct Fixture {
    _tmp: tempfile::TempDir,
    outside: PathBuf,
    share: PathBuf,
    vfs: PosixVfs,
}

fn fixture() -> Fixture {
    fixture_with(PosixOptions::default())
}

fn fixture_with(opts: PosixOptions) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    let share = tmp.path().join("share");
    fs::create_dir(&outside).unwrap();
    fs::create_dir(&share).unwrap();
    fs::write(outside.join("secret"), b"TOP SECRET").unwrap();
    let vfs = PosixVfs::new(&share, opts).unwrap();
    Fixture {
        _tmp: tmp,
        outside,
        share,
        vfs,
    }
}

fn p(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

fn read_opts() -> OpenOptions {
    OpenOptions {
        read: true,
        write: false,
        create: CreateMode::OpenExisting,
        directory: None,
        mode: 0o644,
    }
}

fn create_opts(create: CreateMode, directory: Option<bool>) -> OpenOptions {
    OpenOptions {
        read: true,
        write: true,
        create,
        directory,
        mode: 0o755,
    }
}

#[track_caller]
fn assert_escape(r: io::Result<impl std::fmt::Debug>) {
    let e = r.expect_err("escape was allowed");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e:?}");
    assert!(is_confinement_error(&e), "{e:?}");
}

fn read(vfs: &PosixVfs, path: &str) -> Vec<u8> {
    vfs.open(&p(path), &read_opts())
        .unwrap()
        .file
        .read_at(0, 1 << 16)
        .unwrap()
        .to_vec()
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

#[test]
fn absolute_symlink_to_etc_is_refused() {
    let f = fixture();
    symlink("/etc", f.share.join("etc")).unwrap();
    symlink("/etc/passwd", f.share.join("passwd")).unwrap();
    assert_escape(f.vfs.open(&p("etc/passwd"), &read_opts()));
    assert_escape(f.vfs.open(
        &p("etc"),
        &OpenOptions {
            directory: Some(true),
            ..read_opts()
        },
    ));
    assert_escape(f.vfs.open(&p("passwd"), &read_opts()));
    assert_escape(f.vfs.stat(&p("etc/passwd")));
    assert_escape(f.vfs.stat(&p("passwd")));
    assert_escape(f.vfs.find_case_insensitive(&p("etc"), "PASSWD"));
}

#[test]
fn relative_dotdot_symlinks_are_refused() {
    let f = fixture();
    fs::create_dir(f.share.join("sub")).unwrap();
    symlink("../../outside/secret", f.share.join("sub/s")).unwrap();
    symlink("../..", f.share.join("sub/up")).unwrap();
    symlink("..", f.share.join("parent")).unwrap();
    assert_escape(f.vfs.open(&p("sub/s"), &read_opts()));
    assert_escape(f.vfs.open(&p("sub/up/outside/secret"), &read_opts()));
    assert_escape(f.vfs.open(&p("parent/outside/secret"), &read_opts()));
    assert_escape(f.vfs.stat(&p("sub/up")));
}

#[test]
fn symlinks_that_stay_inside_are_followed() {
    let f = fixture();
    fs::create_dir_all(f.share.join("a/b")).unwrap();
    fs::write(f.share.join("a/b/file"), b"inside").unwrap();
    symlink("a/b/file", f.share.join("direct")).unwrap();
    symlink("a/b", f.share.join("dirlink")).unwrap();
    // Goes up, but only as far as the share root.
    symlink("../../direct", f.share.join("a/b/back")).unwrap();
    assert_eq!(read(&f.vfs, "direct"), b"inside");
    assert_eq!(read(&f.vfs, "dirlink/file"), b"inside");
    assert_eq!(read(&f.vfs, "a/b/back"), b"inside");
    assert_eq!(f.vfs.stat(&p("dirlink")).unwrap().kind, FileKind::Dir);
    // Creating through an inside symlink lands inside.
    let o = f
        .vfs
        .open(&p("dirlink/new"), &create_opts(CreateMode::CreateNew, None))
        .unwrap();
    assert!(o.created);
    assert!(f.share.join("a/b/new").exists());
}

#[test]
fn creation_through_escaping_links_is_refused() {
    let f = fixture();
    symlink(&f.outside, f.share.join("out")).unwrap();
    // A dangling link whose target would be created outside.
    symlink(f.outside.join("planted"), f.share.join("dangling")).unwrap();
    for mode in [
        CreateMode::CreateNew,
        CreateMode::OpenOrCreate,
        CreateMode::CreateOrTruncate,
    ] {
        assert_escape(f.vfs.open(&p("out/planted"), &create_opts(mode, None)));
    }
    for mode in [CreateMode::CreateNew, CreateMode::OpenOrCreate] {
        assert_escape(f.vfs.open(&p("out/newdir"), &create_opts(mode, Some(true))));
    }
    for mode in [
        CreateMode::OpenOrCreate,
        CreateMode::CreateOrTruncate,
        CreateMode::Truncate,
    ] {
        assert_escape(f.vfs.open(&p("dangling"), &create_opts(mode, None)));
    }
    assert!(!exists(&f.outside.join("planted")));
    assert!(!exists(&f.outside.join("newdir")));
    // Truncation through a link must not touch the target.
    symlink(f.outside.join("secret"), f.share.join("sec")).unwrap();
    assert_escape(
        f.vfs
            .open(&p("sec"), &create_opts(CreateMode::Truncate, None)),
    );
    assert_eq!(fs::read(f.outside.join("secret")).unwrap(), b"TOP SECRET");
}

#[test]
fn rename_unlink_rmdir_do_not_follow_escaping_links() {
    let f = fixture();
    symlink(&f.outside, f.share.join("out")).unwrap();
    fs::write(f.share.join("mine"), b"m").unwrap();
    assert_escape(f.vfs.rename(&p("out/secret"), &p("stolen"), false));
    assert_escape(f.vfs.rename(&p("mine"), &p("out/mine"), false));
    assert_escape(f.vfs.unlink(&p("out/secret")));
    assert_escape(f.vfs.rmdir(&p("out/x")));
    assert!(f.outside.join("secret").exists());
    assert!(!exists(&f.outside.join("mine")));
    // The link itself is a name inside the share: it can be renamed and removed.
    f.vfs.rename(&p("out"), &p("out2"), false).unwrap();
    f.vfs.unlink(&p("out2")).unwrap();
    assert!(f.outside.join("secret").exists());
    assert!(!exists(&f.share.join("out2")));
}

#[test]
fn hard_links_are_refused() {
    let f = fixture();
    fs::hard_link(f.outside.join("secret"), f.share.join("hl")).unwrap();
    assert_escape(f.vfs.open(&p("hl"), &read_opts()));
    assert_escape(
        f.vfs
            .open(&p("hl"), &create_opts(CreateMode::Truncate, None)),
    );
    assert_escape(
        f.vfs
            .open(&p("hl"), &create_opts(CreateMode::CreateOrTruncate, None)),
    );
    assert_eq!(fs::read(f.outside.join("secret")).unwrap(), b"TOP SECRET");
    // Directories always have several links; they stay openable.
    fs::create_dir(f.share.join("d")).unwrap();
    f.vfs.open(&p("d"), &read_opts()).unwrap();
}

#[test]
fn hard_links_allowed_when_configured() {
    let f = fixture_with(PosixOptions {
        refuse_hardlinks: false,
    });
    fs::hard_link(f.outside.join("secret"), f.share.join("hl")).unwrap();
    assert_eq!(read(&f.vfs, "hl"), b"TOP SECRET");
}

#[test]
fn link_is_unsupported_where_hard_links_are_refused() {
    let f = fixture();
    fs::write(f.share.join("a"), b"a").unwrap();
    let e = f
        .vfs
        .link(&p("a"), id(&f, "a"), &p("b"), false)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    assert!(!exists(&f.share.join("b")));
}

#[test]
fn link_adds_a_name_replaces_only_when_asked_and_stays_inside() {
    let f = fixture_with(PosixOptions {
        refuse_hardlinks: false,
    });
    fs::create_dir(f.share.join("d")).unwrap();
    fs::write(f.share.join("a"), b"first").unwrap();
    fs::write(f.share.join("d/taken"), b"old").unwrap();
    f.vfs.link(&p("a"), id(&f, "a"), &p("d/b"), false).unwrap();
    assert_eq!(read(&f.vfs, "d/b"), b"first");
    assert_eq!(f.vfs.stat(&p("a")).unwrap().nlink, 2);
    let e = f
        .vfs
        .link(&p("a"), id(&f, "a"), &p("d/taken"), false)
        .unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(rustix::io::Errno::EXIST.raw_os_error())
    );
    assert_eq!(read(&f.vfs, "d/taken"), b"old");
    f.vfs
        .link(&p("a"), id(&f, "a"), &p("d/taken"), true)
        .unwrap();
    assert_eq!(read(&f.vfs, "d/taken"), b"first");
    assert_eq!(f.vfs.stat(&p("a")).unwrap().nlink, 3);
    // Linking over a name of the same file changes nothing and leaves no temporary name.
    f.vfs.link(&p("a"), id(&f, "a"), &p("d/b"), true).unwrap();
    let mut names: Vec<_> = fs::read_dir(f.share.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["b", "taken"]);
    // Neither end may leave the share, through `..` or a symlink.
    symlink(&f.outside, f.share.join("out")).unwrap();
    assert_escape(
        f.vfs
            .link(&p("out/secret"), id(&f, "out/secret"), &p("stolen"), false),
    );
    assert_escape(f.vfs.link(&p("a"), id(&f, "a"), &p("out/planted"), false));
    assert!(!exists(&f.share.join("stolen")));
    assert!(!exists(&f.outside.join("planted")));
    // A symlink at the source is linked itself, never followed.
    symlink(f.outside.join("secret"), f.share.join("ln")).unwrap();
    f.vfs
        .link(&p("ln"), id(&f, "ln"), &p("ln2"), false)
        .unwrap();
    assert!(
        fs::symlink_metadata(f.share.join("ln2"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_escape(f.vfs.open(&p("ln2"), &read_opts()));
}

/// The `(dev, ino)` of `path` below the share (not following a symlink), or of nothing.
fn id(f: &Fixture, path: &str) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(f.share.join(path)).map_or((0, 0), |m| (m.dev(), m.ino()))
}

/// A link names its source by path, and the caller means the file it holds open. When
/// another file has taken the source's name meanwhile, nothing is linked: a replaced target
/// keeps its file, a new name is not left behind, and no temporary name is either.
#[test]
fn link_refuses_a_source_name_that_another_file_took() {
    let f = fixture_with(PosixOptions {
        refuse_hardlinks: false,
    });
    fs::write(f.share.join("a"), b"the open file").unwrap();
    let held = id(&f, "a");
    fs::rename(f.share.join("a"), f.share.join("moved")).unwrap();
    fs::write(f.share.join("a"), b"another file").unwrap();
    fs::write(f.share.join("target"), b"kept").unwrap();
    for replace in [true, false] {
        let to = if replace { "target" } else { "new" };
        let e = f.vfs.link(&p("a"), held, &p(to), replace).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::STALE.raw_os_error())
        );
    }
    assert_eq!(read(&f.vfs, "target"), b"kept");
    assert!(!exists(&f.share.join("new")));
    let mut names: Vec<_> = fs::read_dir(&f.share)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "moved", "target"]);
    assert_eq!(f.vfs.stat(&p("moved")).unwrap().nlink, 1);
    // Under its own name again, it links.
    f.vfs.link(&p("moved"), held, &p("target"), true).unwrap();
    assert_eq!(read(&f.vfs, "target"), b"the open file");
}

#[test]
fn read_dir_does_not_follow_escaping_links() {
    let f = fixture();
    fs::create_dir(f.share.join("d")).unwrap();
    fs::write(f.share.join("d/file"), b"12345").unwrap();
    symlink("/etc/passwd", f.share.join("d/abs")).unwrap();
    symlink("../../outside/secret", f.share.join("d/rel")).unwrap();
    symlink("file", f.share.join("d/ok")).unwrap();
    symlink("nowhere", f.share.join("d/dangling")).unwrap();
    let d = f
        .vfs
        .open(
            &p("d"),
            &OpenOptions {
                directory: Some(true),
                ..read_opts()
            },
        )
        .unwrap();
    let mut list = d.file.read_dir().unwrap();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    let got: Vec<_> = list
        .iter()
        .map(|e| (e.name.as_str(), e.stat.kind, e.stat.size))
        .collect();
    assert_eq!(got[2], ("file", FileKind::File, 5));
    assert_eq!(
        got[3],
        ("ok", FileKind::File, 5),
        "inside link reports its target"
    );
    // Escaping or dangling links report themselves, not their targets.
    for (name, kind, _) in [got[0], got[1], got[4]] {
        assert_eq!(kind, FileKind::Symlink, "{name}");
    }
    assert_eq!([got[0].0, got[1].0, got[4].0], ["abs", "dangling", "rel"]);
}

#[test]
fn symlinked_share_root_is_fine_but_magic_links_are_not() {
    let f = fixture();
    let alias = f.share.parent().unwrap().join("alias");
    symlink(&f.share, &alias).unwrap();
    fs::write(f.share.join("x"), b"x").unwrap();
    let vfs = PosixVfs::new(&alias, PosixOptions::default()).unwrap();
    assert_eq!(read(&vfs, "x"), b"x");
    symlink("/proc/self/root/etc/passwd", f.share.join("magic")).unwrap();
    assert_escape(vfs.open(&p("magic"), &read_opts()));
}

#[test]
fn new_rejects_non_directories() {
    let f = fixture();
    assert!(PosixVfs::new(&f.outside.join("secret"), PosixOptions::default()).is_err());
    assert!(PosixVfs::new(&f.outside.join("missing"), PosixOptions::default()).is_err());
}

#[test]
fn special_files_are_not_opened_for_data() {
    let f = fixture();
    let fifo = f.share.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        0o644.into(),
        0,
    )
    .unwrap();
    assert_eq!(f.vfs.stat(&p("fifo")).unwrap().kind, FileKind::Other);
    // Without a writer a blocking open would hang here; it must return, refused.
    let e = f.vfs.open(&p("fifo"), &read_opts()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e:?}");
    let _sock = std::os::unix::net::UnixListener::bind(f.share.join("sock")).unwrap();
    assert_eq!(f.vfs.stat(&p("sock")).unwrap().kind, FileKind::Other);
    assert!(f.vfs.open(&p("sock"), &read_opts()).is_err());
    let w = f
        .vfs
        .open(&p("w"), &create_opts(CreateMode::CreateNew, None))
        .unwrap();
    assert_eq!(w.file.write_at(0, &[Bytes::from_static(b"ok")]).unwrap(), 2);
}
