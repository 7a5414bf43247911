"""What a run writes: assembled results, the answers log, the run's counters and its manifest."""
