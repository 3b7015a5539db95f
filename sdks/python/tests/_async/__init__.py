"""Tests written once against AsyncClient; ``tests/_sync`` is generated from them."""
