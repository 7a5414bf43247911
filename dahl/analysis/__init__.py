"""Reading finished runs: verdict columns, summaries, leaderboards with bootstrap CIs and paired
tests, DPO preference pairs, agreement between scorers, stratified samples, the temperature
study and their plots.
"""
