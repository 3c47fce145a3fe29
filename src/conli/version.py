"""conli's version, in a module of its own so that any layer can name it without a circle.

``conli.__version__`` is this; importing the package root from inside it would import every
front door.
"""

__version__ = "0.1.0"
