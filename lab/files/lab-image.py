#!/usr/bin/python3
"""Lab fixture, not part of the product: build an image from this node's own files and load it into the node's
engine, the way an air-gapped site loads an image (the lab reaches no registry, so nothing is ever pulled).

  lab-image.py ENGINE IMAGE [--tag NAME]... [--package PKG]... [--file SRC[:DEST]]... [--cmd ARG]...

ENGINE is docker or containerd (containerd's k8s.io namespace, where kubelet's images are). The image has up to two
layers: the files of the Debian packages named (libc6 and busybox give sh, ls, cat, env and the rest as applet
links, and all of glibc, which NVIDIA's nvidia-smi and libnvidia-ml need), in the same layout as on the node
(usr-merged or not); then each --file (a binary such as the lab's Kubernetes components, at DEST, default its own
path). --tag adds another name for the same image (the sandbox image under every name a containerd may ask for).
It is written as a `docker save` archive, which `docker load` and `ctr images import` both read. Prints "loaded"
when it loaded the image, "present" when the engine already had every name.

Uses: the GPU smoke image (lab_gpu_node), the sandbox ("pause") image and the control plane's component images
(lab_kube_node, lab_kubeadm_control_plane).
"""

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ENV_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def containerd_name(image):
    first = image.split("/")[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"


def present(engine, image):
    if engine == "docker":
        return run("docker", "image", "inspect", image, check=False).returncode == 0
    out = run("ctr", "--namespace", "k8s.io", "images", "list", "--quiet", f"name=={containerd_name(image)}",
              check=False).stdout
    return bool(out.strip())


def package_paths(packages):
    paths = set()
    for package in packages:
        for line in run("dpkg", "--listfiles", package).stdout.splitlines():
            if line.startswith("/") and os.path.lexists(line) and not os.path.isdir(line):
                # the canonical place: /lib/x/y on a usr-merged node is /usr/lib/x/y
                paths.add(os.path.join(os.path.realpath(os.path.dirname(line)), os.path.basename(line)))
    return sorted(paths)


def add_folders(tar, paths, done):
    for folder in sorted({os.path.dirname(p) for p in paths} | {"/usr/bin", "/tmp"}):
        parts = folder.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            name = "/".join(parts[:depth])
            if name and name not in done:
                done.add(name)
                info = tarfile.TarInfo(name)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
                tar.addfile(info)


def package_layer(path, paths):
    """The packages' files, their folders, the top-level links of a usr-merged node, busybox's applet links in the
    folder of busybox itself."""
    with tarfile.open(path, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for top in ("/bin", "/sbin", "/lib", "/lib64"):
            if os.path.islink(top):
                info = tarfile.TarInfo(top.lstrip("/"))
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(top)
                tar.addfile(info)
        add_folders(tar, paths, set())
        for p in paths:
            tar.add(p, arcname=p.lstrip("/"), recursive=False)
        busybox = next((p for p in paths if p.endswith("/busybox")), None)
        if busybox:
            for applet in run(busybox, "--list").stdout.split():
                name = os.path.join(os.path.dirname(busybox), applet).lstrip("/")
                if "/" + name not in paths and applet != "busybox":
                    info = tarfile.TarInfo(name)
                    info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                    tar.addfile(info)


def file_layer(path, files):
    with tarfile.open(path, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add_folders(tar, [dest for _, dest in files], {"usr", "usr/bin", "tmp"})
        for src, dest in files:
            info = tar.gettarinfo(src, arcname=dest.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            with open(src, "rb") as handle:
                tar.addfile(info, handle)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def archive(out_path, names, layers, cmd, history):
    """A `docker save` archive of one image (its names, its layer files in order)."""
    diff_ids = [sha256_file(layer) for layer in layers]
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Env": [ENV_PATH], "Cmd": cmd},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
                         "history": [{"created_by": f"kube-gpu-nodes lab: {history}"}]}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": names,
                            "Layers": [f"{d}/layer.tar" for d in diff_ids]}]).encode()
    with tarfile.open(out_path, mode="w") as tar:
        for index, layer in enumerate(layers):
            tar.add(layer, arcname=f"{diff_ids[index]}/layer.tar")
        for name, body in ((config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=["docker", "containerd"])
    parser.add_argument("image")
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    args = parser.parse_args()
    names = [args.image, *[t for t in args.tag if t != args.image]]
    if all(present(args.engine, n) for n in names):
        print("present")
        return 0
    files = [(spec.split(":", 1)[0], spec.split(":", 1)[1] if ":" in spec else spec) for spec in args.file]
    work = tempfile.mkdtemp(prefix="lab-image-", dir="/var/tmp")
    try:
        layers = []
        if args.package:
            layers.append(os.path.join(work, "packages.tar"))
            package_layer(layers[-1], package_paths(args.package))
        if files:
            layers.append(os.path.join(work, "files.tar"))
            file_layer(layers[-1], files)
        history = ", ".join([f"Debian packages {' '.join(args.package)}"] * bool(args.package)
                            + [f"files {' '.join(d for _, d in files)}"] * bool(files))
        out = os.path.join(work, "image.tar")
        archive(out, names, layers, args.cmd or ["sh"], history)
        size = os.path.getsize(out)
        if args.engine == "docker":
            run("docker", "load", "--input", out)
        else:
            run("ctr", "--namespace", "k8s.io", "images", "import", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    missing = [n for n in names if not present(args.engine, n)]
    if missing:
        sys.stderr.write(f"{', '.join(missing)} loaded into {args.engine} but not listed\n")
        return 1
    print(f"loaded {', '.join(names)} ({size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
