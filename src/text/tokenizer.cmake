# (filled by its part)
