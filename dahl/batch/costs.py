"""Money of collected batch results: a hook for the price table (issue 18 §1).

Batch requests cost the provider's batch price (50 % of online at OpenAI and
Anthropic). The price table lives elsewhere (``dahl.pricing``); until it is wired
here every amount is unknown, shown as unknown, never as 0.
"""

from __future__ import annotations

__all__ = ["batch_cost"]


def batch_cost(base_url: str, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for ``prompt_tokens`` + ``completion_tokens`` of ``model`` at ``base_url``'s batch price.

    Returns:
        The amount in USD, or None when the price is unknown (always, until the price
        table is wired in).
    """
    return None
