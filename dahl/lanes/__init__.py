"""The call layer: one lane per (base URL, key identity, model) that every API call goes through.

A lane holds the retry loop, in-flight cap and start ramp; its :class:`Limiter` (built by the
pool's :class:`LimiterFactory`, :class:`MemoryLimiters` by default) holds the RPM/TPM buckets,
pause gate, breaker state and spend cap shared by every caller of the endpoint.
"""

from dahl.lanes._breaker import NOT_FOUND_LIMIT, Breaker, BreakerSettings, BreakerState
from dahl.lanes._clock import Clock, SystemClock, VirtualTimeLoop, run_in_virtual_time
from dahl.lanes._lane import Lane, LanePool, LaneStatistics
from dahl.lanes._limiter import (
    Announced,
    Limiter,
    LimiterFactory,
    LimiterSnapshot,
    Outcome,
    Reservation,
)
from dahl.lanes._limits import LaneLimits, PauseGate, RateBucket, Reply, window_cap
from dahl.lanes._memory import MemoryLimiter, MemoryLimiters, SpendLedger
from dahl.lanes._ramp import StartRamp
from dahl.lanes._redis import Reconnect, RedisLimiter, RedisLimiters, connection_pool, lost_errors
from dahl.lanes._retry import RetryDecision, RetryKind, RetryPolicy, classify, parse_duration_s
from dahl.lanes._spend import MeteredLane, Spend, StageSpend, UsageReply

__all__ = [
    "Announced",
    "Breaker",
    "BreakerSettings",
    "BreakerState",
    "Clock",
    "Lane",
    "LaneLimits",
    "LanePool",
    "LaneStatistics",
    "Limiter",
    "LimiterFactory",
    "LimiterSnapshot",
    "MemoryLimiter",
    "MemoryLimiters",
    "MeteredLane",
    "NOT_FOUND_LIMIT",
    "Outcome",
    "PauseGate",
    "RateBucket",
    "Reconnect",
    "RedisLimiter",
    "RedisLimiters",
    "Reply",
    "Reservation",
    "RetryDecision",
    "RetryKind",
    "RetryPolicy",
    "Spend",
    "SpendLedger",
    "StageSpend",
    "StartRamp",
    "SystemClock",
    "UsageReply",
    "VirtualTimeLoop",
    "classify",
    "connection_pool",
    "lost_errors",
    "parse_duration_s",
    "run_in_virtual_time",
    "window_cap",
]
