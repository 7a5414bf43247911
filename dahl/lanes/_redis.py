"""The Redis limiter backend: lanes of several processes (shards) sharing one account's limits.

Each lane keeps its paces in Redis under ``dahl:lane:<lane key>`` (the key identity is a hash,
never the API key): a request and a token pace (the time the next unit may go, in the Redis
server's milliseconds, advanced by each admission: no burst), each with a log of its last window
(no span of the window takes more than :func:`~dahl.lanes._limits.window_cap` units, as in the
in-memory bucket), a pause-until time, and under the
run's name a breaker trip and a spend meter. Every step is one Lua script timed by the server
(``TIME``), so the shards' clocks never meet. When Redis cannot be reached, at start or mid-run,
every lane of the process goes on in memory with a static share (1/N for N shards) of the limits
and the budget, and says so once; Redis is tried again after a backoff (1 s, doubling to 30 s) and
the paces, pauses and trips are shared again from its first answer. A budget (``--max-cost``) stays
on the static share for the rest of the run: the shared meter cannot know what was spent alone.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from dahl.errors import ConfigError, CostCapReached, FatalAPIError, PermanentAPIError
from dahl.lanes._breaker import BreakerSettings
from dahl.lanes._clock import Clock
from dahl.lanes._limiter import Announced, LimiterSnapshot, Outcome, Reservation
from dahl.lanes._limits import LaneLimits, window_cap
from dahl.lanes._memory import MemoryLimiter, SpendLedger

if TYPE_CHECKING:
    from redis.asyncio import BlockingConnectionPool, Redis

__all__ = ["RedisLimiter", "RedisLimiters", "Reconnect", "connection_pool", "lost_errors"]

logger = logging.getLogger(__name__)

_NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 "
_PX = "local function put(k, v, now) redis.call('SET', k, tostring(v), 'PX', math.ceil(v - now) + 60000) end "
# Each dimension (requests, tokens) also keeps a log of what was taken in its window (a sorted set,
# scored by time, members "units:tag"), so no span of the window takes more than its cap, as the
# in-memory bucket's window cap (lanes/_limits.py window_cap): a server counting in fixed windows
# never sees the pace's last request spill over.
_WINDOW = """
local function units(member) return tonumber(string.match(member, '^[^:]+')) end
local function window_sum(log, total, now, len)
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - len)
  if redis.call('ZCARD', log) == #old then  -- all gone (or the log expired): no total left over either
    redis.call('DEL', log, total)
    return 0
  end
  local sum = tonumber(redis.call('GET', total) or '0')
  if #old > 0 then
    for j = 1, #old do sum = sum - units(old[j]) end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - len)
    redis.call('SET', total, tostring(sum), 'PX', math.ceil(len) + 1000)
  end
  return sum
end
local function cap_wait(log, total, n, cap, len, now)
  local sum = window_sum(log, total, now, len)
  if sum + n <= cap * (1 + 1e-9) or sum == 0 then return 0 end  -- an empty window takes any request
  local entries = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')
  if n > cap then return tonumber(entries[#entries]) + len - now end
  local excess, freed = sum + n - cap, 0
  for j = 1, #entries, 2 do
    freed = freed + units(entries[j])
    if freed >= excess - 1e-9 then return tonumber(entries[j + 1]) + len - now end
  end
  return len
end
local function log_take(log, total, n, tag, len, now)
  window_sum(log, total, now, len)
  redis.call('ZADD', log, now, tostring(n) .. ':' .. tag)
  redis.call('INCRBYFLOAT', total, n)
  redis.call('PEXPIRE', log, math.ceil(len) + 1000)
  redis.call('PEXPIRE', total, math.ceil(len) + 1000)
end
"""
# KEYS pause, request pace, token pace, request log, token log, request log total, token log total;
# ARGV ms per request, requests, ms per token, tokens, request cap, request window ms, token cap, token
# window ms, a tag unique to the call.
# Returns {wait ms, 1 when paused}; wait 0: admitted, both paces advanced and both logs written.
_ACQUIRE = _NOW + _PX + _WINDOW + """
local pause = tonumber(redis.call('GET', KEYS[1]) or '0')
if pause > now then return {tostring(pause - now), 1} end
local wait, due = 0, {}
for i = 1, 2 do
  local per, n = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if per > 0 and n > 0 then
    local tat = math.max(tonumber(redis.call('GET', KEYS[i + 1]) or '0'), now)
    wait = math.max(wait, tat - now,
                    cap_wait(KEYS[i + 3], KEYS[i + 5], n, tonumber(ARGV[3 + 2 * i]), tonumber(ARGV[4 + 2 * i]), now))
    due[i] = tat + per * n
  end
end
if wait > 0 then return {tostring(wait), 0} end
for i, v in pairs(due) do
  put(KEYS[i + 1], v, now)
  log_take(KEYS[i + 3], KEYS[i + 5], ARGV[2 * i], ARGV[9] .. ':' .. i, tonumber(ARGV[4 + 2 * i]), now)
end
return {'0', 0}
"""
# KEYS request pace, token pace, request log, token log, their totals; ARGV ms to add to each pace (negative: a
# refund, never before now), the units charged to each log (what is added), each window ms, a tag.
_SETTLE = _NOW + _PX + _WINDOW + """
for i = 1, 2 do
  local d = tonumber(ARGV[i])
  if d ~= 0 then
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if d > 0 then tat = math.max(tat, now) + d else tat = math.max(tat + d, now) end
    put(KEYS[i], tat, now)
  end
  if tonumber(ARGV[2 + i]) > 0 then
    log_take(KEYS[i + 2], KEYS[i + 4], ARGV[2 + i], ARGV[7] .. ':' .. i, tonumber(ARGV[4 + i]), now)
  end
end
return 0
"""
# KEYS pause, request pace, token pace; ARGV pause ms from now. The paces restart after the pause.
_PAUSE = _NOW + _PX + """
local till = now + tonumber(ARGV[1])
if till > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], tostring(till), 'PX', math.ceil(till - now) + 1)
end
for i = 2, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 and tonumber(redis.call('GET', KEYS[i])) < till then put(KEYS[i], till, now) end
end
return 0
"""
# KEYS charged, reserved, in flight, stop; ARGV usd, cap, seconds to keep. {0} reserved, {1} wait,
# {2, "spent next"} stopped (set once, when a call does not fit with nothing in flight).
_RESERVE = """
local stop = redis.call('GET', KEYS[4])
if stop then return {2, stop} end
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local r = tonumber(redis.call('GET', KEYS[2]) or '0')
local n = tonumber(redis.call('GET', KEYS[3]) or '0')
local usd = tonumber(ARGV[1])
if c + r + usd > tonumber(ARGV[2]) then
  if n > 0 then return {1, ''} end
  stop = tostring(c) .. ' ' .. ARGV[1]
  redis.call('SET', KEYS[4], stop, 'EX', ARGV[3])
  return {2, stop}
end
redis.call('SET', KEYS[2], tostring(r + usd), 'EX', ARGV[3])
redis.call('SET', KEYS[3], n + 1, 'EX', ARGV[3])
return {0, ''}
"""
# KEYS charged, reserved, in flight; ARGV reserved usd, spent usd, seconds to keep.
_SETTLE_SPEND = """
local vals = {tonumber(ARGV[2]), -tonumber(ARGV[1]), -1}
for i = 1, 3 do
  redis.call('SET', KEYS[i], tostring(tonumber(redis.call('GET', KEYS[i]) or '0') + vals[i]), 'EX', ARGV[3])
end
return 0
"""
_KEEP_S = 3600  # a run's trip and spend meter are kept this long after their last change
_POLL_S = 0.02  # how often a call that waits for the shared budget asks again


class Reconnect:
    """When a lost Redis is tried again: ``retry_s`` seconds after the loss, the wait doubling (from
    at least 1 s) up to 30 s while it stays lost; an answer ends the outage and resets the wait.

    Calls that fail while a wait runs (those started before the loss, or together at one retry)
    change nothing: one failed try doubles the wait once.

    Args:
        retry_s: the first wait, seconds (0: the next call tries again).
        clock: monotonic seconds (``time.monotonic``).

    Attributes:
        lost: the error that lost Redis, None while it answers.
        wait_s: seconds to wait after the next failed try.
    """

    MAX_WAIT_S = 30.0

    def __init__(self, retry_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.retry_s = self.wait_s = retry_s
        self.lost: BaseException | None = None
        self._clock = clock
        self._retry_at = 0.0  # clock time at which a lost Redis is tried again

    def usable(self) -> bool:
        """Redis answers, or it was lost and its retry time has come (the next call tries it)."""
        return self.lost is None or self._clock() >= self._retry_at

    def lose(self, exc: BaseException) -> bool:
        """Record a failed call; True when it starts an outage (the caller warns once)."""
        starts = self.lost is None
        if not starts and self._clock() < self._retry_at:
            return False  # another call's failure already set this wait
        self.lost = exc
        self._retry_at = self._clock() + self.wait_s
        self.wait_s = min(max(2 * self.wait_s, 1.0), self.MAX_WAIT_S)
        return starts

    def answered(self) -> bool:
        """Record a successful call; True when it ends an outage (the caller says so)."""
        if self.lost is None:
            return False
        self.lost, self.wait_s = None, self.retry_s
        return True


class RedisLimiters:
    """A :class:`~dahl.lanes._limiter.LimiterFactory` whose limiters share their state through Redis.

    Args:
        url: ``redis://host:port/db`` (``rediss://`` for TLS); an optional ``?run=NAME`` names the
            run, whose shards share one breaker trip and one spend meter (default ``default``).
        shards: how many processes share the limits; each falls back to ``1/shards`` of them.
        max_connections: most connections this process opens (callers beyond it wait).
        retry_s: seconds after a loss before Redis is tried again (the first wait; 0: at the next call).

    Raises:
        ConfigError: ``url`` is no ``redis://``/``rediss://``/``unix://`` URL, or ``shards < 1``;
            the ``redis`` package is missing (``pip install 'dahl[coord]'``).
    """

    def __init__(self, url: str, *, shards: int = 1, max_connections: int = 32, retry_s: float = 1.0) -> None:
        if shards < 1:
            raise ConfigError(f"shards must be >= 1, got {shards}")
        self._pool, self.url, self.run = connection_pool(url, max_connections)
        self.shards = shards
        self.ledger = SpendLedger()  # this process's own spend: the fallback's budget share counts it
        self.link = Reconnect(retry_s)
        #: True once Redis was lost: the budget stays on this process's share from then on.
        self.spend_alone = False
        self._client: Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._capped = False

    def __call__(self, key: str, limits: LaneLimits, *, breaker: BreakerSettings, spread_s: float,
                 clock: Clock, rng: random.Random) -> RedisLimiter:
        """Return the limiter of lane ``key``, its fallback built on this process's share of ``limits``."""
        return RedisLimiter(self, key, limits, breaker=breaker, spread_s=spread_s, clock=clock, rng=rng)

    def _redis(self) -> Redis:
        if self._client is None:  # one client per process, made in the loop that uses it
            from redis.asyncio import Redis

            self._client = Redis(connection_pool=self._pool)
            self._scripts = {n: self._client.register_script(s) for n, s in _SCRIPTS.items()}
        return self._client

    async def run_script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run script ``name`` (registered once, then ``EVALSHA``); RedisError or OSError when lost."""
        self._redis()
        return await self._scripts[name](keys=keys, args=args)

    async def get(self, key: str) -> str | None:
        """``GET key`` as text (errors as :meth:`run_script`)."""
        value = await self._redis().get(key)
        return value.decode() if isinstance(value, bytes) else value

    async def set(self, key: str, value: str) -> None:
        """``SET key value EX`` the run's keep time (errors as :meth:`run_script`)."""
        await self._redis().set(key, value, ex=_KEEP_S)

    @property
    def lost(self) -> BaseException | None:
        """The error that lost Redis, None while it answers."""
        return self.link.lost

    def lose(self, exc: BaseException) -> None:
        """Go on in memory (the budget for good); warn once an outage; try again after a backoff."""
        self.spend_alone = True
        wait_s = self.link.wait_s
        if self.link.lose(exc):
            logger.warning("coordination through Redis at %s lost (%s): this process goes on alone with "
                           "1/%d of the limits and budget and tries again in %g s", self.url,
                           exc or type(exc).__name__, self.shards, wait_s)

    def answered(self) -> None:
        """A call to Redis succeeded: share the paces again after a loss."""
        if self.link.answered():
            logger.warning("coordination through Redis at %s answers again: the limits are shared again%s", self.url,
                           f" (the budget stays on 1/{self.shards})" if self._capped else "")

    async def aclose(self) -> None:
        """Close this process's connections (idempotent)."""
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.aclose()
            except lost_errors():
                pass
        await self._pool.disconnect()

    def __repr__(self) -> str:
        return f"<RedisLimiters {self.url} run={self.run!r} shards={self.shards}{' lost' if self.lost else ''}>"


def connection_pool(url: str, max_connections: int) -> tuple[BlockingConnectionPool, str, str]:
    """A pool of at most ``max_connections`` connections to ``url``; (pool, the URL to show in messages:
    without ``run`` and with any password as ``***``, run name).

    Raises:
        ConfigError: as :class:`RedisLimiters`.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"--coord must be a redis://host:port/db URL, got {_shown(url)!r}")
    try:
        from redis.asyncio import BlockingConnectionPool
    except ImportError as exc:
        raise ConfigError("--coord needs the redis package: pip install 'dahl[coord]'") from exc
    query = parse_qs(parts.query)
    run = query.pop("run", ["default"])[0]
    url = urlunsplit(parts._replace(query="&".join(f"{k}={v[0]}" for k, v in query.items())))
    return BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=5, socket_timeout=5,
                                           socket_connect_timeout=2), _shown(url), run


def _shown(url: str) -> str:
    """``url`` with its password, if any, as ``***`` (messages and logs never carry it)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


@functools.cache
def lost_errors() -> tuple[type[BaseException], ...]:
    """What a lost or unreachable Redis raises: ``RedisError`` (its connection errors and timeouts), OSError."""
    from redis.exceptions import RedisError

    return (RedisError, OSError)


_SCRIPTS = {"acquire": _ACQUIRE, "settle": _SETTLE, "pause": _PAUSE, "reserve": _RESERVE,
            "settle_spend": _SETTLE_SPEND}


class RedisLimiter:
    """The :class:`~dahl.lanes._limiter.Limiter` of one lane, shared through Redis by every shard.

    Its breaker's outage state and probes stay in this process (a :class:`MemoryLimiter`, which is
    also the fallback); a trip is shared. Arguments as :class:`MemoryLimiter`'s, ``coord`` the factory.
    """

    def __init__(self, coord: RedisLimiters, key: str, limits: LaneLimits, *, breaker: BreakerSettings,
                 spread_s: float, clock: Clock, rng: random.Random) -> None:
        self.coord, self.key, self.limits = coord, key, limits
        self._rpm, self._tpm = limits.rpm, limits.tpm
        self.local = MemoryLimiter(key, limits, breaker=breaker, spread_s=spread_s, clock=clock, rng=rng,
                                   ledger=coord.ledger, share=1.0 / coord.shards)
        self._clock, self._rng, self._spread_s = clock, rng, spread_s
        self._paused_until: float | None = None
        lane, run = f"dahl:lane:{key}", f"dahl:run:{coord.run}"
        self._keys = [f"{lane}:pause", f"{lane}:requests", f"{lane}:tokens", f"{lane}:requests:log",
                      f"{lane}:tokens:log", f"{lane}:requests:logged", f"{lane}:tokens:logged"]
        self._trip_key = f"{run}:trip:{key}"
        self._spend_keys = [f"{run}:spend:{k}" for k in ("charged", "reserved", "in_flight", "stop")]

    async def _shared(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """The script's reply, or None while Redis is lost (then this process goes on alone)."""
        if not self.coord.link.usable():
            return None
        try:
            reply = await self.coord.run_script(name, keys, args)
        except lost_errors() as exc:
            self.coord.lose(exc)
            return None
        self.coord.answered()
        return reply

    async def acquire(self, requests: int, tokens: int) -> Reservation:
        """Wait at the shared pause and paces; return what was taken (see the protocol)."""
        rpm, tpm = self._rpm, self._tpm
        if tpm is not None and tokens > tpm:
            raise PermanentAPIError(f"request of {tokens:g} tokens exceeds the token budget of {tpm:g} "
                                    "tokens per minute")
        args = [_ms_per(rpm), requests, _ms_per(tpm), tokens, *_window_ms(rpm), *_window_ms(tpm), uuid.uuid4().hex]
        while (reply := await self._shared("acquire", self._keys, args)) is not None:
            wait_ms, paused = float(reply[0]), int(reply[1])
            if wait_ms <= 0:
                return Reservation(requests if rpm else 0, tokens if tpm else 0)
            spread = self._rng.uniform(0, self._spread_s) if paused else 0.0
            await self._clock.sleep(wait_ms / 1000 + spread)
        return await self.local.acquire(requests, tokens)

    async def settle(self, reserved: Reservation, used_tokens: int | None, *, announced: Announced | None = None,
                     unmetered: Reservation | None = None) -> None:
        """Charge or refund the token pace from the usage; adopt the reply's limits and resets."""
        if not self.coord.link.usable():
            return await self.local.settle(reserved, used_tokens, announced=announced, unmetered=unmetered)
        tokens = requests = 0
        if reserved.tokens and used_tokens is not None and used_tokens >= 0 and (
                used_tokens > reserved.tokens or self.limits.refund_tokens):
            tokens = used_tokens - reserved.tokens
        if announced is not None:
            if announced.rpm is not None and (self._rpm is None or announced.rpm < self._rpm):
                self._rpm = announced.rpm
            if announced.tpm is not None and (self._tpm is None or announced.tpm < self._tpm):
                self._tpm = announced.tpm
            for reset_at in (announced.requests_reset_at, announced.tokens_reset_at):
                if reset_at is not None:
                    await self.pause_until(reset_at)
        if unmetered is not None:
            requests, tokens = unmetered.requests, tokens + unmetered.tokens
        if requests or tokens:
            charged = (max(requests, 0) if self._rpm else 0, max(tokens, 0) if self._tpm else 0)
            await self._shared("settle", self._keys[1:], [requests * _ms_per(self._rpm), tokens * _ms_per(self._tpm),
                                                          *charged, _window_ms(self._rpm)[1], _window_ms(self._tpm)[1],
                                                          uuid.uuid4().hex])

    async def pause_until(self, t: float) -> None:
        """Hold every shard's acquires until clock time ``t`` (seconds on this lane's clock)."""
        self._paused_until = max(t, self._paused_until or t)
        await self.local.pause_until(t)
        await self._shared("pause", self._keys, [max(0.0, (t - self._clock.now()) * 1000)])

    async def admit(self) -> bool:
        """Raise the trip of any shard; else wait for this process's breaker."""
        if self.coord.link.usable() and self.local.breaker.state != "tripped":
            try:
                message = await self.coord.get(self._trip_key)
            except lost_errors() as exc:
                self.coord.lose(exc)
            else:
                self.coord.answered()
                if message is not None:
                    self.local.breaker.tripped_by(FatalAPIError(message), False)
        return await self.local.admit()

    async def report(self, outcome: Outcome, *, probe: bool, error: BaseException | None = None) -> FatalAPIError | None:
        """Count the outcome here; a trip it causes is shared."""
        fatal = await self.local.report(outcome, probe=probe, error=error)
        if fatal is not None:
            await self._share_trip(fatal)
        return fatal

    async def trip(self, error: FatalAPIError, *, probe: bool = False) -> None:
        """Trip this lane in every shard of the run."""
        await self.local.trip(error, probe=probe)
        await self._share_trip(error)

    async def _share_trip(self, error: FatalAPIError) -> None:
        if self.coord.link.usable():
            try:
                await self.coord.set(self._trip_key, str(error))
            except lost_errors() as exc:
                self.coord.lose(exc)
            else:
                self.coord.answered()

    async def reserve_spend(self, usd: float, cap_usd: float | None) -> None:
        """Reserve under the run's cap in the shared meter (alone: under ``cap_usd / shards``)."""
        coord = self.coord
        if cap_usd is not None:
            coord._capped = True
        if cap_usd is not None and not coord.spend_alone:
            while (reply := await self._shared("reserve", self._spend_keys, [repr(usd), repr(cap_usd), _KEEP_S])):
                if int(reply[0]) == 0:
                    return await coord.ledger.reserve(usd, None)
                if int(reply[0]) == 2:
                    spent, refused = (float(x) for x in reply[1].split())
                    raise CostCapReached(cap_usd=cap_usd, spent_usd=spent, next_usd=refused)
                await self._clock.sleep(_POLL_S)
        await coord.ledger.reserve(usd, None if cap_usd is None else cap_usd / coord.shards)

    async def settle_spend(self, reserved_usd: float, spent_usd: float) -> None:
        """Settle here and, with a cap, in the shared meter."""
        self.coord.ledger.settle(reserved_usd, spent_usd)
        if self.coord._capped and not self.coord.spend_alone:
            await self._shared("settle_spend", self._spend_keys[:3], [repr(reserved_usd), repr(spent_usd), _KEEP_S])

    def snapshot(self) -> LimiterSnapshot:
        """The limits as last learnt and this process's view of the pause and breaker."""
        if self.coord.lost is not None:
            return self.local.snapshot()
        paused = self._paused_until if self._paused_until is not None and self._paused_until > self._clock.now() else None
        return LimiterSnapshot(paused_until=paused, rpm=self._rpm, tpm=self._tpm, breaker=self.local.breaker.state)

    def __repr__(self) -> str:
        return f"<RedisLimiter {self.key!r} rpm={self._rpm} tpm={self._tpm} {self.coord!r}>"


def _window_ms(per_minute: float | None) -> tuple[float, float]:
    """(units, milliseconds) of the window cap of ``per_minute`` (:func:`window_cap`); (0, 0) without a limit."""
    if per_minute is None:
        return 0.0, 0.0
    units, seconds = window_cap(per_minute)
    return units, seconds * 1000


def _ms_per(per_minute: float | None) -> float:
    """Milliseconds of pace per unit at ``per_minute`` units per minute; 0 without a limit."""
    return 0.0 if per_minute is None else 60000.0 / per_minute
