"""``python -m acrobat``: the ``acrobat`` command (as torchrun's ``-m acrobat`` runs it)."""

import sys

from acrobat.cli import main

sys.exit(main())
