"""One model's generation requests: sampling settings, the body of each (question, sample), the call.

Completion mode posts ``{"model", "prompt", ...}`` to ``/completions``, chat mode
``{"model", "messages": [user], ...}`` to ``/chat/completions`` (``anthropic``: ``/messages``);
the reply is taken as text, never re-asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp
import msgspec

from dahl.adapters._bodies import Task
from dahl.adapters._endpoint import CallLane, Endpoint
from dahl.config import EndpointConfig
from dahl.generate._settings import PAPER_MAX_TOKENS
from dahl.generate._templates import Mode, Template

if TYPE_CHECKING:
    from dahl.lanes._spend import Spend

__all__ = ["Generated", "Sampler"]


class Generated(msgspec.Struct, frozen=True, array_like=True):
    """One reply, as cached and written.

    Attributes:
        text: the generated text.
        finish_reason: the server's ``finish_reason`` (``"length"``: cut at ``max_tokens``), or None.
        prompt_tokens: reported prompt tokens, or None when the server reported no usage.
        completion_tokens: reported completion tokens, or None.
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


class Sampler:
    """Generation requests of one model to one LLM endpoint.

    Args:
        cfg: the endpoint (its ``temperature``, ``max_tokens`` (None: 256, the DAHL paper's) and
            ``seed`` are the sampling settings).
        session: shared session from :func:`dahl.adapters._http.make_session`.
        lane: the endpoint's lane.
        mode: ``"completion"`` or ``"chat"``.
        template: the generation template.
        top_p: nucleus sampling mass, or None to omit it.
        stop: stop sequences (e.g. a newline and ``Question:``), or ``()`` to send none.
        spend: the run's money meter (calls reported under the model's name), or None.

    Attributes:
        url: the URL requests are posted to (it keys the cache).
        max_tokens: completion budget, tokens.

    Raises:
        ConfigError: (on construction) an unset API key variable; completion mode on an
            ``anthropic`` endpoint; a cost cap and no price for the model.
    """

    def __init__(
        self,
        cfg: EndpointConfig,
        session: aiohttp.ClientSession,
        lane: CallLane,
        mode: Mode,
        template: Template,
        top_p: float | None,
        stop: tuple[str, ...] = (),
        *,
        spend: Spend | None = None,
    ) -> None:
        self.cfg = cfg
        self.mode: Mode = mode
        self.template = template
        self.top_p = top_p
        self.stop = stop
        task = Task(name="generate", template=template.version, max_tokens=PAPER_MAX_TOKENS)
        self._endpoint = Endpoint(cfg, session, lane, task, completion=mode == "completion", spend=spend,
                                  meter_as=cfg.model)
        self.max_tokens = self._endpoint.max_tokens
        self.url = self._endpoint.url

    def sampling(self, sample: int) -> dict[str, Any]:
        """The sampling settings of sample ``sample`` (0-based): mode, temperature, max_tokens,
        top_p, seed, stop (None when unset)."""
        seed = None if self.cfg.seed is None else self.cfg.seed + sample
        return {"mode": self.mode, "temperature": self.cfg.temperature, "max_tokens": self.max_tokens,
                "top_p": self.top_p, "seed": seed, "stop": list(self.stop) or None}

    def body(self, question: str, sample: int) -> dict[str, Any]:
        """The exact JSON body sent for ``question``'s sample ``sample`` (pure; never the API key)."""
        prompt = self.template.render(question)
        body: dict[str, Any] = {"model": self.cfg.model}
        if self.mode == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        sampling = self.sampling(sample)
        body["temperature"] = sampling["temperature"]
        body["max_tokens"] = self.max_tokens
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if sampling["seed"] is not None:
            body["seed"] = sampling["seed"]
        if self.stop:
            body["stop"] = list(self.stop)
        body.update(self.cfg.extra_body)
        return body

    async def generate(self, body: dict[str, Any]) -> Generated:
        """Send ``body`` through the lane and return the reply.

        Raises:
            AdapterError: the HTTP call failed after the lane's retries (quota and fatal
                errors stop the run).
        """
        reply = await self._endpoint.send(body)
        usage = reply.usage
        return Generated(
            text=reply.content,
            finish_reason=reply.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            completion_tokens=usage.completion_tokens if usage is not None else None,
        )
