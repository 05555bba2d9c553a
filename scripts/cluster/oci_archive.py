#!/usr/bin/python3
"""Container images without a container engine (scripts/cluster/images.sh).

There is no Docker, no registry and no podman to build the test cluster's
images with, so this writes them directly, in the docker-archive format (what
`docker save` writes) that `ctr images import` and `docker load` read:
manifest.json, one config JSON per image, one uncompressed tar per layer.

  oci_archive.py layer --out L.tar --tree DIR [--exclude GLOB]...
      a layer of a whole directory tree (a root file system), its owners,
      modes and times as they are on disk
  oci_archive.py layer --out L.tar [--base DIR] [--mtime N]
        [--dir PATH:MODE:UID:GID]... [--file PATH:MODE:UID:GID:SRC]...
      a layer of the named entries only, each with the owner and mode given
      (not the build machine's), and their parent directories with the
      metadata they have in --base (the lower layer), so that applying the
      layer leaves those unchanged
  oci_archive.py archive --out IMG.tar [--created N]
        --image --layer L.tar... --config JSON --tag REF... [--image ...]
      an archive of one or more images; JSON is the image config's "config"
      object (User, Env, Entrypoint, Cmd, WorkingDir, ExposedPorts), "{id}"
      in a REF becomes the first 12 hex digits of the image ID (the config's
      digest, which covers the layers' diff_ids), so a changed image gets a
      new tag; a layer that several images share is written once

`layer` prints the layer's diff_id, `archive` each image's first tag. Every
output is the same bytes for the same inputs (sorted entries, fixed times
where the input has none), so an unchanged image keeps its tag.
"""
import argparse
import fnmatch
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
import time

CHUNK = 1 << 20


class HashingWriter:
    """A write-only file that hashes what passes through it."""

    def __init__(self, f):
        self.f = f
        self.sha = hashlib.sha256()

    def write(self, data):
        self.sha.update(data)
        return self.f.write(data)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def fail(msg):
    sys.exit("oci_archive: " + msg)


def clean_relpath(path):
    rel = os.path.normpath(path.strip("/"))
    if rel in ("", ".") or rel.startswith(".."):
        fail(f"bad path in a layer: {path!r}")
    return rel


def write_atomically(out, write):
    """write(fileobj) into out.tmp, then rename: no half file under out's name."""
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        result = write(f)
    os.replace(tmp, out)
    return result


def add_tree(tar, root, excludes):
    """Every entry under root, sorted, owners/modes/times from disk.

    Names are numeric only (uname/gname empty): the image's own
    /etc/passwd is what gives them names, not the build machine's."""

    def walk(path, rel):
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = rel + e.name
            if any(fnmatch.fnmatchcase(name, pat) for pat in excludes):
                continue
            ti = tar.gettarinfo(e.path, arcname=name)
            if ti is None:  # a socket: nothing a layer can carry
                print(f"oci_archive: skipping {name} (socket)", file=sys.stderr)
                continue
            ti.uname = ti.gname = ""
            ti.mtime = int(ti.mtime)
            if ti.isreg():
                with open(e.path, "rb") as f:
                    tar.addfile(ti, f)
            else:
                tar.addfile(ti)
            if ti.isdir():
                walk(e.path, name + "/")

    walk(root, "")


def parse_entry(spec, with_src):
    parts = spec.split(":", 4 if with_src else 3)
    if len(parts) != (5 if with_src else 4):
        fail(f"bad entry {spec!r}: want PATH:MODE:UID:GID" + (":SRC" if with_src else ""))
    path, mode, uid, gid = parts[:4]
    return (clean_relpath(path), int(mode, 8), int(uid), int(gid),
            parts[4] if with_src else None)


def add_entries(tar, dirs, files, base, mtime):
    """The named directories and files, and the parents they need.

    A parent takes its mode, owner and time from base (the layer below), so
    that the layer does not change it; without base it is 0755 root."""
    entries = {}
    for spec in dirs:
        path, mode, uid, gid, _ = parse_entry(spec, False)
        entries[path] = ("dir", mode, uid, gid, None)
    for spec in files:
        path, mode, uid, gid, src = parse_entry(spec, True)
        entries[path] = ("file", mode, uid, gid, src)
    for path in list(entries):
        parent = os.path.dirname(path)
        while parent and parent not in entries:
            st = os.lstat(os.path.join(base, parent)) if base and os.path.lexists(
                os.path.join(base, parent)) else None
            if st is not None and not stat.S_ISDIR(st.st_mode):
                fail(f"{parent} is not a directory in {base}")
            entries[parent] = ("parent", st.st_mode & 0o7777 if st else 0o755,
                               st.st_uid if st else 0, st.st_gid if st else 0,
                               int(st.st_mtime) if st else mtime)
            parent = os.path.dirname(parent)
    for path in sorted(entries):
        kind, mode, uid, gid, extra = entries[path]
        ti = tarfile.TarInfo(path)
        ti.mode, ti.uid, ti.gid, ti.mtime = mode, uid, gid, mtime
        if kind == "file":
            if not os.path.isfile(extra):
                fail(f"{extra} (for {path}) is not a file")
            ti.size = os.path.getsize(extra)
            with open(extra, "rb") as f:
                tar.addfile(ti, f)
        else:
            ti.type = tarfile.DIRTYPE
            if kind == "parent":
                ti.mtime = extra
            tar.addfile(ti)


def cmd_layer(args):
    if bool(args.tree) == bool(args.dir or args.file):
        fail("layer: either --tree, or --dir/--file entries")
    if args.tree and not os.path.isdir(args.tree):
        fail(f"{args.tree} is not a directory")

    def write(f):
        hw = HashingWriter(f)
        with tarfile.open(fileobj=hw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            if args.tree:
                add_tree(tar, args.tree, args.exclude)
            else:
                add_entries(tar, args.dir, args.file, args.base, args.mtime)
        return "sha256:" + hw.sha.hexdigest()

    print(write_atomically(args.out, write))


def parse_images(argv):
    """archive's arguments: the global ones, then one group per --image."""
    groups = [[]]
    for a in argv:
        if a == "--image":
            groups.append([])
        else:
            groups[-1].append(a)
    head = argparse.ArgumentParser(prog="oci_archive.py archive")
    head.add_argument("--out", required=True)
    head.add_argument("--created", type=int, default=0,
                      help="the images' creation time, seconds since the epoch")
    head.add_argument("--arch", default="amd64")
    head.add_argument("--os", default="linux")
    g = head.parse_args(groups[0])
    img = argparse.ArgumentParser(prog="oci_archive.py archive --image")
    img.add_argument("--layer", action="append", required=True)
    img.add_argument("--config", required=True, help="the image config's config object")
    img.add_argument("--tag", action="append", required=True)
    images = [img.parse_args(grp) for grp in groups[1:]]
    if not images:
        fail("archive: no --image")
    return g, images


def tar_add_bytes(tar, name, data):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
    tar.addfile(ti, io.BytesIO(data))


def cmd_archive(argv):
    g, images = parse_images(argv)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(g.created))
    layers = {}  # real path -> diff_id, each hashed and written once
    for im in images:
        for path in im.layer:
            real = os.path.realpath(path)
            if real not in layers:
                if not os.path.isfile(real):
                    fail(f"layer {path} is missing")
                layers[real] = sha256_file(real)
    manifest, first_tags, configs = [], [], []
    for im in images:
        try:
            cfg = json.loads(im.config)
        except ValueError as e:
            fail(f"--config is not JSON: {e}")
        if not isinstance(cfg, dict):
            fail("--config must be a JSON object")
        diff_ids = [layers[os.path.realpath(p)] for p in im.layer]
        config = {
            "architecture": g.arch,
            "os": g.os,
            "created": created,
            "config": cfg,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": created,
                         "created_by": "scripts/cluster/images.sh: " + os.path.basename(p)}
                        for p in im.layer],
        }
        blob = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        image_id = hashlib.sha256(blob).hexdigest()
        tags = [t.replace("{id}", image_id[:12]) for t in im.tag]
        configs.append((image_id + ".json", blob))
        manifest.append({"Config": image_id + ".json", "RepoTags": tags,
                         "Layers": [d.split(":", 1)[1] + "/layer.tar" for d in diff_ids]})
        first_tags.append(tags[0])

    def write(f):
        with tarfile.open(fileobj=f, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            written = set()
            for real, diff_id in layers.items():
                name = diff_id.split(":", 1)[1] + "/layer.tar"
                if name in written:  # the same bytes under two paths
                    continue
                written.add(name)
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = os.path.getsize(real), 0o644, 0
                with open(real, "rb") as lf:
                    tar.addfile(ti, lf)
            for name, blob in configs:
                if name not in written:
                    written.add(name)
                    tar_add_bytes(tar, name, blob)
            tar_add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode() + b"\n")

    write_atomically(g.out, write)
    for t in first_tags:
        print(t)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "archive":
        return cmd_archive(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    lay = sub.add_parser("layer", help="write one layer tar, print its diff_id")
    lay.add_argument("--out", required=True)
    lay.add_argument("--tree", help="a directory whose whole content is the layer")
    lay.add_argument("--exclude", action="append", default=[],
                     help="with --tree: a glob on the relative path (dev/*)")
    lay.add_argument("--dir", action="append", default=[], metavar="PATH:MODE:UID:GID")
    lay.add_argument("--file", action="append", default=[], metavar="PATH:MODE:UID:GID:SRC")
    lay.add_argument("--base", help="the lower layer's tree: where parents' metadata comes from")
    lay.add_argument("--mtime", type=int, default=0, help="the time of the named entries")
    sub.add_parser("archive", help="write an image archive (see the module's doc)")
    args = p.parse_args()
    cmd_layer(args)


if __name__ == "__main__":
    main()
