"""The call layer: one lane per (base URL, key identity, model) that every API call goes through.

A lane holds the endpoint's limits (an RPM and a TPM bucket, an in-flight cap, a pause gate
set by Retry-After), the typed retry decision, the circuit breaker, the start ramp and the
run's spend meter. It knows HTTP replies and their usage, not claims; the adapters call
through it and the scheduler sits above the adapters.
"""
