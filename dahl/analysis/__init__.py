"""Reading finished runs: verdict columns, summaries, leaderboards, preference pairs, agreement,
stratified samples, the temperature study and their plots."""
