"""What people read: ``summary`` (the table `harness run` prints at the end) and `harness report` (``build``: the
leaderboard from ``data`` with bootstrap intervals, ``plots``, the HTML template, ``screenshot``)."""
