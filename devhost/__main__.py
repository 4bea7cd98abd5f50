"""``python -m devhost``: see devhost.cli."""

from devhost.cli import main

raise SystemExit(main())
