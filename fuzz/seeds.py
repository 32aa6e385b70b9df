#!/usr/bin/env python3
"""seeds.py - writes the fuzzers' seed corpus (fuzz/corpus/{stream,profile}/).

Contract: `seeds.py DIR [PROFILE...]` writes small synthetic streams and profiles that
reach every record type of src/common/hpformat.h (version 3) into DIR/stream and
DIR/profile, and for each real PROFILE (written by heapprof-attach, so zstd-compressed:
the zstd command decompresses it; a raw one is taken as it is) copies its raw records to
DIR/profile and derives the stream the viewer read: the same records without the
viewer's SESSION and SYMBOL, and with the modules renamed (see cheap_module); the synthetic
"full" profile is also written zstd-compressed, as "full-zstd". The encoding
is hpformat.h's, little-endian, by hand, so a seed does not depend on the code it tests.
"""
import os
import struct
import subprocess
import sys

MAGIC = b"HEAPPROF"
VERSION = 3
HELLO, MODULE, STACK, SITES, ROUND, END, LIVE, SESSION, SYMBOL = 1, 2, 3, 4, 5, 6, 7, 16, 17
VIEWER_ONLY = (SESSION, SYMBOL)
EXE = "/usr/bin/true"
REALTIME = 1700000000 * 10**9
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def header():
    return MAGIC + struct.pack("<II", VERSION, 0)


def rec(rtype, body):
    return struct.pack("<II", rtype, len(body)) + body


def hello(mode=3, rate=0):
    return rec(HELLO, struct.pack("<IIIIQQQ", 1234, mode, 1000, 64, rate, 10**9, REALTIME))


def module(mid, path, start, end, bias=0, flags=0, build_id=b""):
    p = path.encode()
    return rec(MODULE, struct.pack("<IIQQQHHI", mid, flags, bias, start, end, len(p),
                                   len(build_id), 0) + p + build_id)


def stack(sid, frames):
    return rec(STACK, struct.pack("<II", sid, len(frames)) +
               b"".join(struct.pack("<Q", f) for f in frames))


def sites(entries):
    body = struct.pack("<II", len(entries), 0)
    for sid, kind, size, allocs, frees, temp in entries:
        body += struct.pack("<IIQQQQQQ", sid, kind, size, allocs, allocs * size, frees,
                            frees * size, temp)
    return rec(SITES, body)


def live(entries):
    body = struct.pack("<II", len(entries), 0)
    for sid, blocks, nbytes in entries:
        body += struct.pack("<IIQQQQ", sid, 0, blocks, nbytes, 900, 400)
    return rec(LIVE, body)


def round_(seq, allocs, frees, flags=0):
    return rec(ROUND, struct.pack("<IIQQQQQQQQQQQ", seq, flags, seq * 10**9, 1 << 21, allocs,
                                  allocs * 32, frees, frees * 32, 3, allocs - frees,
                                  (allocs - frees) * 32, 0, 65536))


def end(reason=1):
    return rec(END, struct.pack("<II", reason, 0))


def session(comm="target", exe=EXE, args=("target", "-x"), host="host"):
    cmdline = b"".join(a.encode() + b"\0" for a in args)
    c, e, h = comm.encode(), exe.encode(), host.encode()
    return rec(SESSION, struct.pack("<IHHIHHQ", 1234, len(c), len(e), len(cmdline), len(h), 0,
                                    REALTIME) + c + e + cmdline + h)


def symbol(addr, mid, frames):
    body = struct.pack("<QII", addr, mid, len(frames))
    for func, path, line in frames:
        f, p = func.encode(), path.encode()
        body += struct.pack("<IIHHI", line, 3, len(f), len(p), 0) + f + p
    return rec(SYMBOL, body)


BASE = 0x400000


def synthetic():
    """(name, stream records, viewer records inserted after each STACK) per seed."""
    full = [hello(), module(1, EXE, BASE, BASE + 0x10000, BASE),
            module(2, "linux-vdso.so.1", 0x7fff0000, 0x7fff2000),
            stack(1, [BASE + 0x1234, BASE + 0x2345, 0x7fff0100]),
            stack(2, [BASE + 0x1234, 0x9999]),
            sites([(1, 1, 48, 10, 4, 1), (2, 2, 8192, 3, 3, 3), (0, 1, 16, 5, 0, 0)]),
            round_(1, 18, 7),
            module(1, "", 0, 0, flags=1),
            stack(3, [BASE + 0x3000]), sites([(3, 1, 4096, 2, 0, 0)]),
            live([(1, 6, 288), (3, 2, 8192)]), round_(2, 20, 7, flags=3), end()]
    syms = {
        1: [symbol(BASE + 0x1234, 1, [("inlined_helper", "/src/a.h", 12),
                                      ("_ZN3foo3barEv", "/src/a.c", 40)]),
            symbol(BASE + 0x2345, 1, [("main", "/src/a.c", 99)]),
            symbol(0x7fff0100, 2, [])],
        2: [symbol(0x9999, 0, [])],
        3: [symbol(BASE + 0x3000, 1, [("malloc", "", 0)])],
    }
    return [
        ("full", full, syms),
        ("basic", [hello(mode=1), sites([(0, 0, 0, 9, 2, 0)]), round_(1, 9, 2),
                   rec(99, b"future record type"), round_(2, 9, 9), end(1)], {}),
        ("extended-sampled",
         [hello(mode=2, rate=4096), sites([(0, 1, 24, 7, 1, 1), (0, 2, 1 << 20, 1, 0, 0)]),
          round_(1, 8, 1, flags=2)], {}),
        ("killed", [hello(), stack(1, [0x1000]), sites([(1, 1, 8, 1, 0, 0)]),
                    round_(1, 1, 0), round_(2, 1, 0)[:40]], {1: [symbol(0x1000, 0, [])]}),
        ("empty", [], {}),
    ]


def split(data):
    """The records of a profile or stream after its header, as (type, whole record)."""
    out, off = [], 16
    while off + 8 <= len(data):
        rtype, n = struct.unpack_from("<II", data, off)
        out.append((rtype, data[off:off + 8 + n]))
        off += 8 + n
    return out


def cheap_module(r):
    """A MODULE record naming a file that libdw reads fast. Reading libc's symbols and
    looking for its debug info costs 80 ms a run under the sanitizers and fuzzes libdw, not
    the viewer: the first module becomes EXE (its build-id then differs: that check runs),
    the others their base names, which the symbolizer does not open."""
    mid, flags, bias, start, end, plen, blen, res = struct.unpack_from("<IIQQQHHI", r, 8)
    path = r[48:48 + plen].decode(errors="replace")
    build_id = r[48 + plen:48 + plen + blen]
    path = EXE if path and path == cheap_module.first.setdefault("path", path) else \
        os.path.basename(path)
    return module(mid, path, start, end, bias, flags, build_id)


cheap_module.first = {}


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: seeds.py DIR [PROFILE...]")
    top = sys.argv[1]
    for sub in ("stream", "profile"):
        os.makedirs(os.path.join(top, sub), exist_ok=True)
    for name, recs, syms in synthetic():
        write(os.path.join(top, "stream", name), header() + b"".join(recs))
        prof = header() + session()
        nstack = 0
        for r in recs:
            prof += r
            if struct.unpack_from("<I", r)[0] == STACK:
                nstack += 1
                prof += b"".join(syms.get(nstack, []))
        write(os.path.join(top, "profile", name), prof)
        if name == "full":
            # One compressed seed, so that the corpus run reaches the decompressing reader
            # (src/common/hpzsource.c) as heapprof-view meets every profile it is given.
            write(os.path.join(top, "profile", name + "-zstd"),
                  subprocess.run(["zstd", "-q", "-1", "-c"], input=prof, stdout=subprocess.PIPE,
                                 check=True).stdout)
    for path in sys.argv[2:]:
        with open(path, "rb") as f:
            data = f.read()
        if data.startswith(ZSTD_MAGIC):
            data = subprocess.run(["zstd", "-dc", path], stdout=subprocess.PIPE,
                                  check=True).stdout
        name = os.path.splitext(os.path.basename(path))[0]
        write(os.path.join(top, "profile", name), data)
        cheap_module.first = {}
        write(os.path.join(top, "stream", name),
              data[:16] + b"".join(cheap_module(r) if t == MODULE else r
                                   for t, r in split(data) if t not in VIEWER_ONLY))


if __name__ == "__main__":
    main()
