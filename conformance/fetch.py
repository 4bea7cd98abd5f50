"""Fetch Microsoft's SDK test suites at run time, into a git-ignored cache (nothing fetched is committed).

Python: azure-servicebus's source distribution (``pip download --no-binary``), which ships its tests/.
Go: the azservicebus module from the Go module proxy (``go mod download -json``), which ships its
*_test.go; copied out of the read-only module cache so ``go test`` may run in it.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

PY_PACKAGE = "azure-servicebus"
PY_VERSION = "7.15.0"
GO_MODULE = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
GO_VERSION = "v1.11.0"


def python_tests(cache: Path) -> Path:
    """The extracted sdist's root (holding tests/)."""
    root = cache / f"azure_servicebus-{PY_VERSION}"
    if (root / "tests").is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"{PY_PACKAGE}=={PY_VERSION}", "-d", str(cache)], check=True, timeout=300)
    archive = next(cache.glob(f"azure[-_]servicebus-{PY_VERSION}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(cache, filter="data")
    return root


def go_module(cache: Path, go: str) -> Path:
    """A writable copy of the module's source (with its tests), its dependencies downloaded."""
    root = cache / f"azservicebus@{GO_VERSION}"
    if (root / "go.mod").is_file():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([go, "mod", "download", "-json", f"{GO_MODULE}@{GO_VERSION}"], check=True,
                         capture_output=True, text=True, timeout=600, cwd=cache)
    source = Path(json.loads(out.stdout)["Dir"])
    shutil.copytree(source, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    subprocess.run([go, "mod", "download"], check=True, timeout=900, cwd=root)
    return root
