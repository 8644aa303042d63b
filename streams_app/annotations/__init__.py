"""Annotations: notes on the time axis (a deploy marker, an incident note), shown on every chart they fall in."""
