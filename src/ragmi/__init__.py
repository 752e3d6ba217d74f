"""ragmi: membership inference against retrieval-augmented generation."""

__version__ = "0.1.0"
