"""Metrics over transcripts; each declares the channel it observes."""
