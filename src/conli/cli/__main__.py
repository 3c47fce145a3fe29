"""``python -m conli.cli``: the same as the ``conli`` command."""

import sys

from conli.cli import main

sys.exit(main())
