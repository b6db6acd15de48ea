"""Test set-up shared by every test module.

The fine-tuning tools live in ``finetune/`` and install as the package ``sirerag_finetune``
(``[tool.setuptools.package-dir]``). Tests run this checkout's code (``PYTHONPATH=$PWD``),
so ``sirerag_finetune`` is loaded from this checkout's ``finetune/`` folder even when an
install of another checkout (or none) provides it.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _use_this_checkouts_finetune() -> None:
    folder = ROOT / "finetune"
    found = importlib.util.find_spec("sirerag_finetune")
    if found is not None and found.origin and Path(found.origin).resolve().parent == folder:
        return
    spec = importlib.util.spec_from_file_location("sirerag_finetune", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sirerag_finetune"] = module
    spec.loader.exec_module(module)


_use_this_checkouts_finetune()
