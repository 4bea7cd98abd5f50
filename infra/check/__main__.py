"""python -m infra.check [BICEP_FILES...]: one line per finding; exit status 1 if there is any."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.check import DEFAULT_FILES, check, checked_resources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.check", description=__doc__)
    parser.add_argument("files", nargs="*", type=Path, help="entry Bicep files (default: infra/main.bicep)")
    args = parser.parse_args(argv)
    files = tuple(args.files) or DEFAULT_FILES
    findings = check(files)
    for finding in findings:
        print(finding)
    if findings:
        print(f"{len(findings)} finding(s)", file=sys.stderr)
        return 1
    print(f"ok: {checked_resources(files)} resources checked against the Azure SDK models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
