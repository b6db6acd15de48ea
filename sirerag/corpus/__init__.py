"""Corpus reading: a ``.jsonl``/``.json`` file or a folder of ``.txt``/``.md`` files into
:class:`~sirerag.core.types.Document` records (:mod:`.load`), which files a folder corpus reads (:mod:`.folder`)
and Markdown files split at their headings (:mod:`.markdown`)."""
