"""Trust region (being written)."""

__all__: list[str] = []
