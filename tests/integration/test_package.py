"""sbemulator as a package of its own: the wheel holds only the emulator, and a project that installs
it (in a fresh venv with no code of this repository) tests against it through the pytest plugin.

The wheel and the venv are built once per module in a temporary directory (the source folder is
copied first, so parallel runs never share a build directory).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "sbemulator"
SAMPLE = PACKAGE_DIR / "examples" / "pytest-sample"
PIP_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300

# Building the wheel and installing it with its dependencies into a fresh venv is pip work: bounded by
# PIP_TIMEOUT_S per command, not by the suite-wide 120 s meant for tests that talk to the emulator.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(PIP_TIMEOUT_S)]


def run(args: list[str], cwd: Path, timeout: float = PIP_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sbemulator-build")
    source = work / "sbemulator"
    shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info", "dist"))
    out = work / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)], work)
    [built] = out.glob("sbemulator-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel, azure-servicebus and pytest: nothing of this repository's own code."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    run([sys.executable, "-m", "venv", str(venv)], venv.parent)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel),
         "azure-servicebus", "pytest"], venv.parent)
    return python


def test_wheel_holds_only_the_emulator_and_every_subpackage(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"sbemulator", "sbemulator-0.1.0.dist-info"}
    # Every subpackage in the source folder is listed in sbemulator/pyproject.toml (a new one must be added).
    source_packages = {
        str(p.parent.relative_to(PACKAGE_DIR.parent)) for p in PACKAGE_DIR.rglob("__init__.py")
        if "examples" not in p.parts and "build" not in p.relative_to(PACKAGE_DIR).parts
    }
    wheel_packages = {name.rsplit("/", 1)[0] for name in names if name.endswith("/__init__.py")}
    assert source_packages == wheel_packages
    assert "sbemulator/admin/console_static/index.html" in names
    assert not any("/examples/" in name or name.endswith("pyproject.toml") for name in names)
    metadata = zipfile.ZipFile(wheel).read("sbemulator-0.1.0.dist-info/METADATA").decode()
    requires = sorted(line.split(":", 1)[1].strip() for line in metadata.splitlines()
                      if line.startswith("Requires-Dist:"))
    assert requires == ["cryptography>=41", "h11>=0.14", "wsproto>=1.2"]
    entry_points = zipfile.ZipFile(wheel).read("sbemulator-0.1.0.dist-info/entry_points.txt").decode()
    assert "sbemulator = sbemulator.pytest_plugin" in entry_points
    assert "sbemulator = sbemulator.runtime.cli:main" in entry_points


def test_sample_project_passes_against_the_installed_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "sample"
    shutil.copytree(SAMPLE, project)
    where = run([str(fresh_venv), "-c", "import sbemulator; print(sbemulator.__file__)"], project)
    assert str(fresh_venv.parent.parent) in where.stdout  # the installed copy, not this checkout
    installed = run([str(fresh_venv), "-m", "pip", "list", "--format=freeze"], project).stdout.lower()
    assert "servicebus-messaging-patterns" not in installed
    result = run([str(fresh_venv), "-m", "pytest", "-q", "-p", "no:cacheprovider"], project, RUN_TIMEOUT_S)
    assert "5 passed" in result.stdout, result.stdout


def test_cli_entry_point_of_the_installed_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    result = run([str(fresh_venv.parent / "sbemulator"), "--help"], tmp_path, RUN_TIMEOUT_S)
    assert "--config" in result.stdout


def test_sample_project_under_this_repository_environment(tmp_path: Path) -> None:
    """The editable install's entry point loads the plugin once (no double registration), the
    --sbemulator-config option overrides the ini option, and under pytest-xdist (when installed) every
    worker gets its own emulator."""
    project = tmp_path / "sample"
    shutil.copytree(SAMPLE, project)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\nsbemulator_config = "missing.json"\n')
    workers = ["-n", "2"] if importlib.util.find_spec("xdist") else []
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers,
                  "--sbemulator-config", str(project / "Config.json")], project, RUN_TIMEOUT_S)
    assert "5 passed" in result.stdout, result.stdout
