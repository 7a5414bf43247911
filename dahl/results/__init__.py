"""What a run writes: one answer's assembled result, the append-only answers log, the run's
counters and the run folder's manifest.
"""
