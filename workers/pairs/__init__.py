"""The steps of a captured answer before judging: storing it (capturing) and finding its question (settling)."""
