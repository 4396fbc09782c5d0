"""Lists every nemesis name, space-separated (scripts/chaos.sh runs each)."""

from . import all_nemeses

print(" ".join(all_nemeses()))
