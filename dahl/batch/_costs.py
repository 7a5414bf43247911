"""Money of collected batch results at the provider's batch price.

Batch requests cost the batch price: the online price times the table's
``batch_discount`` (0.5 at OpenAI and Anthropic; :mod:`dahl.pricing`). A model
without a batch price is unknown, shown as unknown, never as 0.
"""

from __future__ import annotations

from dahl.pricing import PriceTable, cost_usd
from dahl.records import Usage

__all__ = ["batch_cost"]


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int, *, table: PriceTable | None = None) -> float | None:
    """USD for ``prompt_tokens`` + ``completion_tokens`` of ``model`` at its batch price.

    Args:
        model: model name as sent in the batch requests.
        prompt_tokens, completion_tokens: tokens reported by the collected results.
        table: prices (default: the shipped table, ``dahl/prices.toml``).

    Returns:
        The amount in USD, or None when the model has no known batch price.
    """
    price = (table if table is not None else PriceTable.shipped()).price_for(model, batch=True)
    return cost_usd(Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens), price)
