"""The package's version, in a module of its own so that no layer imports the package's face.

``pyproject.toml``'s version provider reads it from here.
"""

__version__ = "0.1.0"
