"""The demo campaign's local pieces (needs the `demo` extra: torch, transformers)."""
