"""A build backend that builds out of the source tree: setuptools, run on a copy in a temporary folder.

setuptools writes ``build/`` and ``*.egg-info`` next to the sources it builds, so ``pip install
./sbemulator`` left both in a checkout. Every hook of a wheel or sdist build here copies the package
folder to a temporary one first and runs there: the build itself, its metadata, and the question of
what the build requires (setuptools answers it by running ``egg_info``, which writes the egg-info:
pip asks it first, in an isolated build). An editable install (``pip install -e``) must point at the
sources, so it is setuptools' own, in place (its egg-info is git-ignored).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools  # type: ignore[import-untyped]
from setuptools.build_meta import (  # type: ignore[import-untyped]  # noqa: F401  (re-exported hooks)
    build_editable,
    get_requires_for_build_editable,
    prepare_metadata_for_build_editable,
)

LEFT_OUT = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache")


@contextmanager
def _in_a_copy() -> Iterator[None]:
    """Run the body with the working directory a copy of the project (the current directory)."""
    source = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="sbemulator-build-") as folder:
        copy = Path(folder) / source.name
        shutil.copytree(source, copy, ignore=LEFT_OUT)
        os.chdir(copy)
        try:
            yield
        finally:
            os.chdir(source)


def _absolute(directory: str) -> str:
    return str(Path(directory).resolve())


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    wheel_directory = _absolute(wheel_directory)
    metadata_directory = None if metadata_directory is None else _absolute(metadata_directory)
    with _in_a_copy():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    sdist_directory = _absolute(sdist_directory)
    with _in_a_copy():
        return _setuptools.build_sdist(sdist_directory, config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    metadata_directory = _absolute(metadata_directory)
    with _in_a_copy():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    with _in_a_copy():
        return list(_setuptools.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    with _in_a_copy():
        return list(_setuptools.get_requires_for_build_sdist(config_settings))
