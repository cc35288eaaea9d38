#!/usr/bin/env python3
"""smbq-xca's decoders and encoders against streams Windows made: Samba's MS-XCA test vectors.

Samba's source tree holds files that Windows' Compression API compressed with plain LZ77 and
LZ77+Huffman, at its two levels (testdata/compression), beside the originals. The same code
makes a Windows client's compressed WRITE, so these are the nearest thing to a Windows peer.
This is not in CI: no registry this project's CI can reach serves Samba's source.

    python3 scripts/xca-windows-vectors.py SAMBA_SOURCE_TREE

Every stream must decode to its original exactly, except where the generator stored the
original as it was (compression did not pay; such a file is the original byte for byte and
is not an LZ77 stream). It prints how the size of smbq's encoding compares with Windows' on
the same originals. Exit status 1 when any stream decodes wrong.
"""

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETS = {
    "compressed-plain": ("lz77", ".lzplain"),
    "compressed-more-plain": ("lz77", ".lzplain"),
    "compressed-huffman": ("lz77huffman", ".lzhuff"),
    "compressed-more-huffman": ("lz77huffman", ".lzhuff"),
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    vectors = pathlib.Path(sys.argv[1]) / "testdata" / "compression"
    subprocess.run(["cargo", "build", "--release", "-p", "smbq-xca", "--example", "xca"],
                   cwd=ROOT, check=True)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    xca = str(target / "release" / "examples" / "xca")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="xca-vectors-"))
    wrong = 0
    for directory, (codec, ext) in SETS.items():
        exact = bad = raw = ours_total = windows_total = 0
        for compressed in sorted((vectors / directory).glob(f"*{ext}")):
            original = vectors / "decompressed" / (compressed.name[: -len(ext)] + ".decomp")
            if not original.exists():
                continue
            want = original.read_bytes()
            if compressed.read_bytes() == want:
                raw += 1
                continue
            out = tmp / "out"
            r = subprocess.run([xca, "decompress", codec, str(compressed), str(out),
                                str(len(want))], capture_output=True, text=True)
            if r.returncode == 0 and out.read_bytes() == want:
                exact += 1
            else:
                bad += 1
                print(f"WRONG {directory}/{compressed.name}: {r.stderr.strip()}")
            if want and not directory.startswith("compressed-more"):
                ours = tmp / "ours"
                subprocess.run([xca, "compress", codec, str(original), str(ours)], check=True)
                ours_total += ours.stat().st_size
                windows_total += compressed.stat().st_size
        sizes = (f", smbq's encoding {ours_total} bytes against Windows' {windows_total}"
                 f" ({ours_total / windows_total:.3f}x)") if windows_total else ""
        wrong += bad
        print(f"{directory}: {exact} decoded exactly, {bad} wrong, {raw} stored as they"
              f" were{sizes}")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
