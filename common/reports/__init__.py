"""Report figures shared by the weekly digest, App Home and `/judge stats`: periods, statistics, quoting rules."""
