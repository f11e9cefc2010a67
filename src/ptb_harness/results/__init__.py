"""What a campaign produced: each cell's outcome from its records, the status grid, the
tables, leaderboard and plots."""
