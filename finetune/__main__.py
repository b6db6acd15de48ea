"""``python -m sirerag_finetune make-data | train | evaluate`` (the same as ``sirerag finetune ...``)."""
from __future__ import annotations

import sys

from sirerag_finetune.cli import main

if __name__ == "__main__":
    sys.exit(main())
