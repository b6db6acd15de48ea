"""``python -m sirerag``: the ``sirerag`` command (for a process started with a given interpreter, e.g. an MCP
client launching ``python -m sirerag mcp INDEX``)."""
import sys

from sirerag.cli.main import main

sys.exit(main())
