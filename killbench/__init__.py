"""killbench: a frozen benchmark that scores test generators by mutation testing."""

__version__ = "0.2.0"
