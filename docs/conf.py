"""Sphinx configuration of kcodec's documentation (scripts/docs builds it).

Sphinx with MyST: the guides stay Markdown (they were the README's sections, and GitHub
shows them as they are), while autodoc and napoleon build the API reference from the
docstrings. The local extension in _ext/ generates the configuration tables and the error
hierarchy from the code at build time, so they cannot drift from it.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))      # the checkout: kcodec, and bench for plots
sys.path.insert(0, os.path.join(HERE, "_ext"))

import kcodec  # noqa: E402

project = "kcodec"
author = "kcodec developers"
copyright = "kcodec developers"
release = kcodec.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "kcodec_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "README.md", "_static"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_theme = "alabaster"
# Wide enough for the code blocks: at 1280 px with a 220 px sidebar and code at 0.85em a
# block shows about 110 columns; longer lines wrap (kcodec.css) instead of scrolling.
html_theme_options = {"description": "a fast, correct Kafka wire codec for Python",
                      "fixed_sidebar": True, "page_width": "1280px", "sidebar_width": "220px",
                      "code_font_size": "0.85em"}
html_css_files = ["kcodec.css"]
html_title = f"kcodec {release}"

# MyST: anchors for headings down to level 3, so [text](page.md#a-heading) links resolve and
# are checked like every other internal link.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# Code blocks without a language are shown as they are, not lexed as Python.
highlight_language = "none"

# autodoc: the order of the source, the signature without repeating the type hints in it,
# and the optional peers mocked so the reference builds without pyspark or the clients.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_mock_imports = ["kafka", "aiokafka", "pyspark", "pyarrow"]
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Settings:" lists a configuration class's settings (the configuration tables are made
# from it too): shown like keyword parameters.
napoleon_custom_sections = [("Settings", "params_style")]
