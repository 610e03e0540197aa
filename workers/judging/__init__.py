"""Judging's rules: plain functions over plain data (which judges, what to store, when to retry or give up)."""
