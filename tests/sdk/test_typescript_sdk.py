"""The TypeScript SDK (sdk-ts/) against the shared server, on both passes: its own node:test suite runs
with SIE_URL set to this session's server (or gateway), and the tarball `npm pack` makes installs into an
empty project and calls that server. `make sdk-ts` (a prerequisite of `make test`) installs and builds it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sie_sdk import __version__ as python_sdk_version
from tests.helpers.catalog import MINILM, SMOLLM
from tests.helpers.server import free_port

SDK_TS = Path(__file__).resolve().parents[2] / "sdk-ts"
NER = "test/tiny-gliner"
NODE = shutil.which("node")
NPM = shutil.which("npm")


def _node_major() -> int:
    if NODE is None:
        return 0
    found = re.match(r"v(\d+)", subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout)
    return int(found.group(1)) if found else 0


pytestmark = pytest.mark.skipif(
    NODE is None or NPM is None or _node_major() < 18,
    reason="no Node 18+ with npm (the TypeScript SDK needs them: apt-get install -y nodejs npm); `make sdk-ts` warns",
)


def _run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output[-8000:]}"
    return output


@pytest.fixture(scope="module")
def built() -> Path:
    """The built package; rebuilt here (tsc, no network) when a source is newer than the last build."""
    stamp = SDK_TS / ".built"
    assert (SDK_TS / "node_modules").is_dir() and stamp.exists(), "sdk-ts is not installed: run `make sdk-ts`"
    sources = [*SDK_TS.glob("src/*.ts"), *SDK_TS.glob("test/*.ts"), *SDK_TS.glob("tsconfig*.json")]
    if any(path.stat().st_mtime > stamp.stat().st_mtime for path in sources):
        _run([str(NPM), "run", "build", "--silent"], SDK_TS, timeout=120)
        stamp.touch()
    return SDK_TS


def test_the_typescript_sdk_suite_against_the_server(built: Path, base_url: str) -> None:
    env = {"SIE_URL": base_url, "SIE_TEST_MINILM": MINILM, "SIE_TEST_SMOLLM": SMOLLM, "SIE_TEST_NER": NER}
    output = _run([str(NODE), "--test", "dist-test/"], built, timeout=180, env=env)
    counts = dict(re.findall(r"^# (tests|pass|fail|skipped) (\d+)$", output, re.MULTILINE))
    assert counts.get("fail") == "0" and counts.get("skipped") == "0", output[-8000:]
    assert int(counts.get("pass", "0")) >= 15, output[-8000:]


def test_npm_pack_gives_an_installable_package(built: Path, tmp_path: Path) -> None:
    """The tarball installs offline into an empty project, with its types, and its client runs there (against a
    closed port: the suite above already runs these files against the server, so this test runs in one pass).
    Its one dependency comes as a tarball too, packed from the copy `npm ci` installed by the lock file: offline,
    npm resolves a registry range only from its cache's package metadata, which `npm ci` does not fetch (a fresh
    machine's cache has none)."""
    packed = _run([str(NPM), "pack", "--json", "--pack-destination", str(tmp_path)], built, timeout=60)
    msgpack = built / "node_modules" / "@msgpack" / "msgpack"
    dependency = _run([str(NPM), "pack", "--json", "--ignore-scripts", "--pack-destination", str(tmp_path)], msgpack,
                      timeout=60)  # fmt: skip
    dependency_file = json.loads(dependency[dependency.index("[") :])[0]["filename"]
    manifest = json.loads(packed[packed.index("[") :])[0]
    files = {entry["path"] for entry in manifest["files"]}
    assert {"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/client.js"} <= files
    assert not any(name.startswith(("src/", "test/", "dist-test/", "node_modules/")) for name in files)
    project = tmp_path / "app"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    offline = ["--offline", "--no-audit", "--no-fund", "--loglevel=error"]
    tarballs = [str(tmp_path / manifest["filename"]), str(tmp_path / dependency_file)]
    _run([str(NPM), "install", *offline, *tarballs], project, timeout=120)
    script = (
        "const sdk = await import('@sie/sdk');"
        "const client = new sdk.SIEClient({ baseUrl: process.env.SIE_URL, retry: null });"
        "const failed = await client.encode('org/model', 'hello').catch((e) => e.constructor.name);"
        "const table = sdk.apiError(404, 'MODEL_NOT_FOUND', 'm') instanceof sdk.ModelNotFoundError;"
        "console.log(JSON.stringify({ version: sdk.VERSION, failed, table }));"
    )
    closed = f"http://127.0.0.1:{free_port()}"
    output = _run([str(NODE), "--input-type=module", "-e", script], project, timeout=60, env={"SIE_URL": closed})
    version = json.loads((SDK_TS / "package.json").read_text())["version"]
    assert version == python_sdk_version  # one version for both SDKs
    answer = json.loads(output.strip().splitlines()[-1])
    assert answer == {"version": version, "failed": "SIEConnectionError", "table": True}
    assert (project / "node_modules" / "@sie" / "sdk" / "dist" / "index.d.ts").exists()
    assert (project / "node_modules" / "@msgpack" / "msgpack" / "package.json").exists()
