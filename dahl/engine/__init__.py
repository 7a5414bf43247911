"""The asyncio scheduler that streams answers through split, check and write."""
