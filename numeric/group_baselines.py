"""Group baselines (being written)."""

__all__: list[str] = []
