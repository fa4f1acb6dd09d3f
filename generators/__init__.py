"""The built-in generators, registered through the `killbench.generators` entry points."""
