"""Build script. All metadata lives in pyproject.toml.

The compiled tap_mix extension (csrc/) is not part of this release; this file
is where its build will be declared.
"""

from setuptools import setup

setup()
