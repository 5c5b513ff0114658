#!/usr/bin/python3
"""Lab fixture, not part of the product: build the GPU smoke image from this node's own Debian packages and load it
into the node's engine, the way an air-gapped site loads an image (the lab reaches no registry).

  smoke-image.py docker|containerd IMAGE

The image holds the files of the Debian packages libc6 (all of glibc: NVIDIA's nvidia-smi and libnvidia-ml need
libc, libm, libdl, libpthread and librt) and busybox (sh, ls, cat, env and the rest as applet links), in the same
layout as on the node (usr-merged or not). It is written as a `docker save` archive, which `docker load` and
`ctr images import` both read, and loaded into Docker, or into containerd's k8s.io namespace (where kubelet's images
are). Prints "loaded" when it loaded the image, "present" when the engine already had it.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGES = ("libc6", "busybox")
ENV_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def present(engine, image):
    if engine == "docker":
        return run("docker", "image", "inspect", image, check=False).returncode == 0
    first = image.split("/")[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        name = image
    else:
        name = f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"
    out = run("ctr", "--namespace", "k8s.io", "images", "list", "--quiet", f"name=={name}", check=False).stdout
    return bool(out.strip())


def package_paths():
    paths = set()
    for package in PACKAGES:
        for line in run("dpkg", "--listfiles", package).stdout.splitlines():
            if line.startswith("/") and os.path.lexists(line) and not os.path.isdir(line):
                # the canonical place: /lib/x/y on a usr-merged node is /usr/lib/x/y
                paths.add(os.path.join(os.path.realpath(os.path.dirname(line)), os.path.basename(line)))
    return sorted(paths)


def layer(paths):
    """The layer tar: the packages' files, their folders, the top-level links of a usr-merged node, busybox's applet
    links in the folder of busybox itself."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.GNU_FORMAT) as tar:
        folders = sorted({os.path.dirname(p) for p in paths} | {"/usr/bin", "/tmp"})
        for top in ("/bin", "/sbin", "/lib", "/lib64"):
            if os.path.islink(top):
                info = tarfile.TarInfo(top.lstrip("/"))
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(top)
                tar.addfile(info)
        done = set()
        for folder in folders:
            parts = folder.strip("/").split("/")
            for depth in range(1, len(parts) + 1):
                name = "/".join(parts[:depth])
                if name and name not in done:
                    done.add(name)
                    info = tarfile.TarInfo(name)
                    info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
                    tar.addfile(info)
        for path in paths:
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        busybox = next(p for p in paths if p.endswith("/busybox"))
        applets = run(busybox, "--list").stdout.split()
        for applet in applets:
            name = os.path.join(os.path.dirname(busybox), applet).lstrip("/")
            if "/" + name not in paths and applet != "busybox":
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(info)
    return data.getvalue()


def archive(image, layer_tar):
    """A `docker save` archive of one image with one layer."""
    diff_id = hashlib.sha256(layer_tar).hexdigest()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Env": [ENV_PATH], "Cmd": ["sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
                         "history": [{"created_by": "kube-gpu-nodes lab: Debian packages " + ", ".join(PACKAGES)}]}
                        ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [image], "Layers": [f"{diff_id}/layer.tar"]}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, body in ((f"{diff_id}/layer.tar", layer_tar), (config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def main(engine, image):
    if present(engine, image):
        print("present")
        return 0
    body = archive(image, layer(package_paths()))
    with tempfile.NamedTemporaryFile(suffix=".tar") as handle:
        handle.write(body)
        handle.flush()
        if engine == "docker":
            run("docker", "load", "--input", handle.name)
        else:
            run("ctr", "--namespace", "k8s.io", "images", "import", handle.name)
    if not present(engine, image):
        sys.stderr.write(f"{image} was loaded into {engine} but is not listed\n")
        return 1
    print(f"loaded {image} ({len(body) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
