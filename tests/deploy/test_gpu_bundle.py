"""scripts/gpu_bundle.py: the bundle for the GPU machine holds exactly what the server needs beyond the image. Its
verification on made-up wheels (a missing need, dead weight, a package the image has, a wheel for another Python,
two versions, an image version a need refuses, an extra's needs), and on the real bundle `make gpu-bundle` builds."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / ".gpu-bundle"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_bundle", REPO / "scripts" / "gpu_bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bundle"] = module
    spec.loader.exec_module(module)
    return module


gb = _tool()


def wheel(folder: Path, name: str, version: str, *requires: str, tag: str = "py3-none-any") -> Path:
    path = folder / f"{name}-{version}-{tag}.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\n{meta}")
    return path


def pins(*specs: str) -> list:  # type: ignore[type-arg]
    out = []
    for spec in specs:
        name, _, rest = spec.partition("==")
        version, _, waived = rest.partition(";")
        out.append(gb.Pin(name, version, frozenset(w for w in waived.split(",") if w)))
    return out


def needs(*specs: str) -> list:  # type: ignore[type-arg]
    return [gb.Requirement(s) for s in specs]


IMAGE = {"torch": "2.11.0", "numpy": None, "transformers": "5.17.0"}


def problems(folder: Path, pinned: list, wanted: list, python: str = "3.12") -> list[str]:  # type: ignore[type-arg]
    return list(gb.verify(folder, python, pinned=pinned, image=IMAGE, needs=wanted).problems)


def test_a_complete_bundle_passes(tmp_path: Path) -> None:
    wheel(tmp_path, "fastapi", "1.0", "starlette>=1", "numpy", "pywin32; sys_platform == 'win32'")
    wheel(tmp_path, "starlette", "1.2", "typing-extensions; python_version < '3.10'")
    wheel(tmp_path, "orjson", "3.1", tag="cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64")
    assert problems(tmp_path, pins("fastapi==1.0", "starlette==1.2", "orjson==3.1"), needs("fastapi", "orjson")) == []


def test_a_need_neither_has_is_named(tmp_path: Path) -> None:
    wheel(tmp_path, "fastapi", "1.0", "starlette>=1")
    found = problems(tmp_path, pins("fastapi==1.0"), needs("fastapi"))
    assert found == ["fastapi needs starlette>=1: neither the image nor the bundle has it; pin it"]


def test_dead_weight_and_what_the_image_has_are_refused(tmp_path: Path) -> None:
    wheel(tmp_path, "fastapi", "1.0")
    wheel(tmp_path, "leftpad", "0.1")
    wheel(tmp_path, "numpy", "2.0")
    found = problems(tmp_path, pins("fastapi==1.0", "leftpad==0.1", "numpy==2.0"), needs("fastapi", "numpy"))
    assert "leftpad is pinned but nothing needs it: unpin it" in found
    assert "numpy is in the image already: unpin it (the image's copy is used)" in found


def test_a_wheel_for_another_python_or_a_second_version_is_refused(tmp_path: Path) -> None:
    wheel(tmp_path, "orjson", "3.1", tag="cp311-cp311-manylinux_2_17_x86_64")
    found = problems(tmp_path, pins("orjson==3.1"), needs("orjson"))
    assert found == ["orjson-3.1-cp311-cp311-manylinux_2_17_x86_64.whl does not install on CPython 3.12, x86-64 Linux"]
    assert problems(tmp_path, pins("orjson==3.1"), needs("orjson"), python="3.11") == []
    wheel(tmp_path, "orjson", "3.2", tag="cp311-cp311-manylinux_2_17_x86_64")
    assert any("two wheels" in p for p in problems(tmp_path, pins("orjson==3.1"), needs("orjson"), python="3.11"))


def test_an_image_version_a_need_refuses_fails_unless_waived(tmp_path: Path) -> None:
    wheel(tmp_path, "gliner", "0.2", "transformers<5.17.0", "torch>=2")
    found = problems(tmp_path, pins("gliner==0.2"), needs("gliner"))
    assert found == ["gliner needs transformers<5.17.0; the image has transformers 5.17.0"]
    assert problems(tmp_path, pins("gliner==0.2;transformers"), needs("gliner")) == []


def test_an_extras_needs_are_followed(tmp_path: Path) -> None:
    wheel(tmp_path, "mcp", "2.3", "pyjwt[crypto]>=2")
    wheel(tmp_path, "pyjwt", "2.15", 'cryptography>=3; extra == "crypto"')
    found = problems(tmp_path, pins("mcp==2.3", "pyjwt==2.15"), needs("mcp"))
    assert found == ["pyjwt needs cryptography>=3: neither the image nor the bundle has it; pin it"]


def test_the_pin_files_parse() -> None:
    pinned = gb.read_pins()
    assert len({p.name for p in pinned}) == len(pinned)
    assert next(p for p in pinned if p.name == "gliner").waived == {"transformers"}
    image = gb.read_image()
    assert image["torch"] == "2.11.0" and image["transformers"] == "5.17.0" and "fastapi" not in image


def test_the_real_bundle_is_complete_and_small_enough() -> None:
    """What `make gpu-bundle` built: every need of the server met by it or the image, one version each, and under
    60 MiB with the tree that travels beside it."""
    if not any(BUNDLE.glob("*.whl")):
        pytest.skip(f"no wheels in {BUNDLE}: `make gpu-bundle` (which `make test` runs) builds them")
    verdict = gb.verify(BUNDLE)
    assert verdict.ok, verdict.problems
    total = gb.folder_bytes(BUNDLE) + gb.tree_bytes()
    assert total < gb.BUNDLE_GOAL_MIB * 2**20, f"{total / 2**20:.1f} MiB"
