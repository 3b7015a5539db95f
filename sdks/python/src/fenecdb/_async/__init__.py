"""The asyncio client, written once; ``_sync`` is generated from it."""
