"""The weekly digest: period logic, statistics (pure), and the chart."""
