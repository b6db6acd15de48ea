"""``python -m finetune make-data | train | evaluate`` (the same as ``sirerag finetune ...``)."""
from __future__ import annotations

import sys

from sirerag.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["finetune", *sys.argv[1:]]))
