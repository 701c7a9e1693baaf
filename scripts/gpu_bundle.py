"""The GPU machine's bundle: wheels for the Python packages the server needs that the machine's image lacks.

The GPU machine has no network, so what it runs must travel with the working tree (64 MiB in all). Its image
already holds torch, transformers, sentence-transformers and most of what they need (scripts/gpu/image-packages.txt);
this tool downloads the rest, pinned in scripts/gpu/bundle.txt, one version each, and checks that nothing is missing:

    python3 scripts/gpu_bundle.py build  [--python 3.12] [--out .gpu-bundle]   download, verify, print the size
    python3 scripts/gpu_bundle.py verify [--python 3.12] [--dir .gpu-bundle]   verify only (no network)

Verify starts from what the server and the GPU check import (pyproject.toml's core dependencies and its `server`
extra, plus scripts/gpu/roots.txt) and follows every wheel's Requires-Dist, evaluated for that Python on x86-64
Linux: each requirement must be met by a wheel in the folder or by a package of the image, and every pin must be
reached (no dead weight) and must not be a package the image already has. A requirement the image's version breaks
on purpose is waived in bundle.txt (``# waive: NAME``) with the reason beside it.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.tags import Tag, compatible_tags, cpython_tags
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # a bare interpreter: pip carries the same library
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef,assignment]
    from pip._vendor.packaging.tags import Tag, compatible_tags, cpython_tags  # type: ignore[no-redef,assignment]
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename  # type: ignore[no-redef]
    from pip._vendor.packaging.version import Version  # type: ignore[no-redef,assignment]

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "scripts" / "gpu"
PINS = HERE / "bundle.txt"
ROOTS = HERE / "roots.txt"
IMAGE = HERE / "image-packages.txt"
DEVICE_PYTHON = "3.12"
#: glibc of the image (Ubuntu 24.04: 2.39) down to manylinux1; pip matches each tag exactly
MANYLINUX = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
#: what the whole transfer to the GPU machine may hold (the working tree and carried folders)
TRANSFER_LIMIT_MIB = 64
BUNDLE_GOAL_MIB = 60


@dataclass(frozen=True)
class Pin:
    name: str  # canonical
    version: str
    waived: frozenset[str] = frozenset()  # canonical names of requirements the image breaks on purpose


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def read_pins(path: Path = PINS) -> list[Pin]:
    pins = []
    for line in _lines(path):
        spec, _, comment = line.partition("#")
        name, _, version = spec.strip().partition("==")
        if not version:
            raise ValueError(f"{path.name}: {line!r} is not NAME==VERSION")
        waived = re.findall(r"waive:\s*([A-Za-z0-9_.-]+)", comment)
        pins.append(Pin(canonicalize_name(name), version.strip(), frozenset(canonicalize_name(w) for w in waived)))
    names = [p.name for p in pins]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{path.name} pins these twice: {', '.join(twice)}")
    return pins


def read_image(path: Path = IMAGE) -> dict[str, str | None]:
    """The image's packages: canonical name -> version (None where the listing gave none)."""
    image: dict[str, str | None] = {}
    for line in _lines(path):
        name, _, version = line.strip().partition("==")
        image[canonicalize_name(name)] = version or None
    return image


def roots() -> list[Requirement]:
    """What the server and the GPU check import on the GPU machine."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["server"], *_lines(ROOTS)]
    return [Requirement(spec.split("#")[0].strip()) for spec in specs]


def environment(python: str) -> dict[str, str]:
    env = dict(default_environment())
    env.update(
        python_version=python,
        python_full_version=f"{python}.0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
    )
    return env


def supported_tags(python: str) -> set[Tag]:
    version = tuple(int(x) for x in python.split("."))
    interpreter = f"cp{version[0]}{version[1]}"
    return {
        *cpython_tags(version, abis=[interpreter, "abi3", "none"], platforms=MANYLINUX),
        *compatible_tags(version, interpreter, platforms=MANYLINUX),
    }


def wheel_requirements(path: Path) -> list[Requirement]:
    with zipfile.ZipFile(path) as wheel:
        meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(wheel.read(meta).decode())
    return [Requirement(r) for r in message.get_all("Requires-Dist") or []]


def _plain(req: Requirement) -> str:
    """The requirement without its marker (already evaluated where it was found)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in (extras or {""}))


def verify(
    folder: Path,
    python: str = DEVICE_PYTHON,
    *,
    pinned: list[Pin] | None = None,
    image: dict[str, str | None] | None = None,
    needs: list[Requirement] | None = None,
) -> Verdict:
    """Whether ``folder`` holds exactly the pinned wheels for ``python``, and with the image meets every need
    (``pinned``, ``image`` and ``needs`` default to bundle.txt, image-packages.txt and ``roots()``)."""
    verdict = Verdict()
    pins = {p.name: p for p in (read_pins() if pinned is None else pinned)}
    image = read_image() if image is None else image
    tags = supported_tags(python)
    env = environment(python)
    wheels: dict[str, tuple[Version, Path]] = {}
    for path in sorted(folder.glob("*.whl")):
        name, version, _build, wheel_tags = parse_wheel_filename(path.name)
        if name in wheels:
            verdict.problems.append(f"{name}: two wheels ({wheels[name][1].name}, {path.name}); keep one")
        wheels[name] = (version, path)
        if not wheel_tags & tags:
            verdict.problems.append(f"{path.name} does not install on CPython {python}, x86-64 Linux")
    for name, pin in pins.items():
        if name not in wheels:
            verdict.problems.append(f"{name}=={pin.version} is pinned but not in {folder}: run the build")
        elif wheels[name][0] != Version(pin.version):
            verdict.problems.append(f"{name}: {wheels[name][1].name} in the folder, {pin.version} pinned")
        if name in image:
            verdict.problems.append(f"{name} is in the image already: unpin it (the image's copy is used)")
    for name in wheels.keys() - pins.keys():
        verdict.problems.append(f"{wheels[name][1].name} is in the folder but not pinned in {PINS.name}")

    reached: set[str] = set()
    # each requirement's marker is evaluated where it is found (with the extras asked of its owner)
    starts = roots() if needs is None else needs
    todo: list[tuple[Requirement, str]] = [(r, "the server") for r in starts if _applies(r, env, set())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, wanted_by = todo.pop()
        name = canonicalize_name(req.name)
        if wanted_by in pins and name in pins[wanted_by].waived:
            continue
        if name in wheels:
            version, path = wheels[name]
            if not req.specifier.contains(version, prereleases=True):
                verdict.problems.append(f"{wanted_by} needs {_plain(req)}; the bundle has {name} {version}")
            reached.add(name)
            key = (name, frozenset(req.extras))
            if key not in seen:
                seen.add(key)
                for sub in wheel_requirements(path):
                    if _applies(sub, env, set(req.extras)):
                        todo.append((sub, name))
        elif name in image:
            known = image[name]
            if known is not None and not req.specifier.contains(Version(known), prereleases=True):
                verdict.problems.append(f"{wanted_by} needs {_plain(req)}; the image has {name} {known}")
        else:
            verdict.problems.append(f"{wanted_by} needs {_plain(req)}: neither the image nor the bundle has it; pin it")
    for name in sorted(pins.keys() - reached):
        verdict.problems.append(f"{name} is pinned but nothing needs it: unpin it")
    waived = sorted(f"{p.name}: {', '.join(sorted(p.waived))}" for p in pins.values() if p.waived)
    if waived:
        verdict.notes.append("waived (the image's version is used): " + "; ".join(waived))
    return verdict


def mib(n: int) -> float:
    return n / 2**20


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.whl"))


def tree_bytes() -> int:
    """What git sends of the project: tracked files and untracked ones it does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((REPO / name.decode()).stat().st_size for name in listed if name and (REPO / name.decode()).is_file())


def download(out: Path, python: str) -> None:
    """The pinned wheels for ``python`` into ``out`` (replacing what was there), with no dependencies."""
    with tempfile.TemporaryDirectory(prefix="gpu-bundle-") as tmp:
        platforms = [arg for tag in MANYLINUX for arg in ("--platform", tag)]
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python,
            "--implementation",
            "cp",
            *platforms,
            "--dest",
            tmp,
            *[f"{p.name}=={p.version}" for p in read_pins()],
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:  # pip's own words, less its notes on this machine's unused index folders
            sys.stderr.write("".join(line for line in done.stderr.splitlines(True) if "is ignored" not in line))
            raise SystemExit(f"pip download failed (exit {done.returncode})")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(tmp, out)


def report(folder: Path, python: str) -> int:
    verdict = verify(folder, python)
    for note in verdict.notes:
        print(f"note: {note}")
    size = folder_bytes(folder)
    count = len(list(folder.glob("*.whl")))
    print(f"{folder}: {count} wheels for CPython {python}, {mib(size):.1f} MiB")
    if python == DEVICE_PYTHON:
        tree = tree_bytes()
        total = mib(size + tree)
        print(
            f"with the project tree ({mib(tree):.1f} MiB) the GPU machine gets {total:.1f} MiB "
            f"(goal under {BUNDLE_GOAL_MIB} MiB; the transfer limit is {TRANSFER_LIMIT_MIB} MiB)"
        )
        if total >= BUNDLE_GOAL_MIB:
            verdict.problems.append(f"{total:.1f} MiB with the tree: over the {BUNDLE_GOAL_MIB} MiB goal")
    sys.stdout.flush()
    for problem in verdict.problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 0 if verdict.ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "verify"])
    parser.add_argument("--python", default=DEVICE_PYTHON, help="the CPython version the wheels are for")
    parser.add_argument("--out", "--dir", dest="folder", type=Path, default=REPO / ".gpu-bundle")
    args = parser.parse_args()
    if args.command == "build":
        download(args.folder, args.python)
    sys.exit(report(args.folder, args.python))


if __name__ == "__main__":
    main()
