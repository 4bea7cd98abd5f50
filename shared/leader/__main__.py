"""``python -m shared.leader``: the command line of one replica (``shared.leader_cli``), kept apart from
the elector so that the elector does not import its own command line."""

import sys

from shared.leader_cli import main

sys.exit(main())
